"""`make bench`: run every benchmark in this folder, each printing its own ratio lines.

    .venv/bin/python bench/run_all.py [--quick] [--data-dir DIR]

The flags are passed to every benchmark (see bench/README.md). Each runs as its own process, one
after the other (stats.py before pages.py, which reads its data); a benchmark that crashes does
not stop the others. This process holds the data folder's embedded PostgreSQL and Redis for the
whole run, so the benchmarks join them instead of each starting and stopping its own. The last
block is one line per benchmark, `<script>: exit <code> in <s> s` (or `timed out after <s> s`), and
the exit status is 1 if any of them failed.

With --quick every benchmark has QUICK_LIMIT seconds and the run as a whole QUICK_BUDGET: a
benchmark past its time is stopped (its whole process group, the console or workers it started
included) and named in the summary, and one that would start after the budget is spent is skipped
and named too. tests/bench/test_benchmarks_quick.py waits longer than the budget, so it always
reads a summary that says which benchmark was slow instead of timing out itself.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from common import _held, data_dir

HERE = Path(__file__).resolve().parent
ORDER = [
    "ingest.py",
    "ingest.py --shared",
    "client.py",
    "storage.py",
    "verify.py",
    "grading_queue.py",
    "stats.py",
    "stats.py --long",
    "pages.py",
    "similarity.py",
    "hnsw_insert.py",
    "builtin_graph.py",
    "monitor.py",
    "memory.py",
]
# Seconds for one quick benchmark, and for the quick run as a whole: over 3x what they take on the
# 2-core machine the suite runs on (the run 134 s in CI on a quiet machine; 603 s with six other
# test runs beside it). The test around it waits 1,500 s.
QUICK_LIMIT, QUICK_BUDGET = 300.0, 1200.0


def run_one(command: list[str], limit: float | None) -> int | None:
    """The benchmark's exit code, or None if it ran past `limit` seconds and was stopped: SIGTERM
    first, which bench/common.py turns into an exit that stops what the benchmark started (a console,
    workers), then SIGKILL to its process group for whatever is left after 30 s."""
    process = subprocess.Popen(command, cwd=HERE.parent, start_new_session=limit is not None)
    try:
        return process.wait(limit)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        return None


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
    results: list[tuple[str, str]] = []
    run_started = time.perf_counter()
    for name in ORDER:
        script, *options = name.split()
        if not (HERE / script).exists():
            continue
        limit = None
        if args.quick:
            limit = min(QUICK_LIMIT, QUICK_BUDGET - (time.perf_counter() - run_started))
            if limit <= 0:
                results.append((name, f"skipped: the quick run's {QUICK_BUDGET:.0f} s were spent"))
                continue
        print(f"\n### {name}", flush=True)
        started = time.perf_counter()
        code = run_one([sys.executable, str(HERE / script), *options, *flags], limit)
        seconds = time.perf_counter() - started
        outcome = f"exit {code} in {seconds:.1f} s" if code is not None else f"timed out after {seconds:.0f} s"
        results.append((name, outcome))
    print("\n### summary")
    for name, outcome in results:
        print(f"{name}: {outcome}")
    print(f"total: {time.perf_counter() - run_started:.1f} s")
    failed = [name for name, outcome in results if not outcome.startswith("exit 0 ")]
    if failed:
        print(f"benchmarks that failed, timed out or were skipped: {', '.join(failed)}")
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
