"""`make bench`: run every benchmark in this folder, each printing its own ratio lines."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["ingest.py", "ingest.py --shared", "verify.py", "grading_queue.py", "stats.py", "pages.py"]


def main() -> int:
    failed = []
    for name in ORDER:
        script, *options = name.split()
        if not (HERE / script).exists():
            continue
        print(f"\n### {name}", flush=True)
        if subprocess.run([sys.executable, str(HERE / script), *options], cwd=HERE.parent).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nbenchmarks that crashed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
