"""`make bench`: run every benchmark in this folder, each printing its own ratio lines.

    .venv/bin/python bench/run_all.py [--quick] [--data-dir DIR]

The flags are passed to every benchmark (see bench/README.md). Each runs as its own process, one
after the other (stats.py before pages.py, which reads its data); a benchmark that crashes does
not stop the others. This process holds the data folder's embedded PostgreSQL and Redis for the
whole run, so the benchmarks join them instead of each starting and stopping its own. The last
block is one line per benchmark, `<script>: exit <code> in <s> s`, and the exit status is 1 if
any of them crashed.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from common import _held, data_dir

HERE = Path(__file__).resolve().parent
ORDER = [
    "ingest.py",
    "ingest.py --shared",
    "storage.py",
    "verify.py",
    "grading_queue.py",
    "stats.py",
    "pages.py",
    "similarity.py",
    "monitor.py",
    "memory.py",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every benchmark at its small size (seconds each)")
    parser.add_argument("--data-dir", type=Path, help="data folder for every benchmark (default: as each one's)")
    args = parser.parse_args()
    folder = data_dir(args)
    flags = (["--quick"] if args.quick else []) + ["--data-dir", str(folder)]
    from console import embedded

    if not os.environ.get("BENCH_DATABASE_URL"):
        embedded.postgres_url(folder)  # held until this process exits; each benchmark joins it
    if not os.environ.get("CELERY_BROKER_URL"):
        _held.append(embedded.start_redis(folder))
    results = []
    for name in ORDER:
        script, *options = name.split()
        if not (HERE / script).exists():
            continue
        print(f"\n### {name}", flush=True)
        started = time.perf_counter()
        code = subprocess.run([sys.executable, str(HERE / script), *options, *flags], cwd=HERE.parent).returncode
        results.append((name, code, time.perf_counter() - started))
    print("\n### summary")
    for name, code, seconds in results:
        print(f"{name}: exit {code} in {seconds:.1f} s")
    failed = [name for name, code, _ in results if code != 0]
    if failed:
        print(f"benchmarks that crashed: {', '.join(failed)}")
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
