"""Shared set-up for benchmarks: a separate embedded database, Django, and a real HTTP server."""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
_held: list = []  # child processes (the embedded broker) that live as long as the benchmark


def _stop_children() -> None:
    if not _held:  # nothing started (`--help`, or a run that failed early): importing now would fail
        return
    from console import embedded

    for process in _held:
        embedded.stop_process(process)


atexit.register(_stop_children)


def _exit_on_sigterm(signum, frame) -> None:
    # bench/run_all.py stops a quick benchmark past its time with SIGTERM: exiting through SystemExit
    # runs the `finally` blocks and atexit hooks that stop the consoles, workers and broker it started.
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _exit_on_sigterm)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--quick` and `--data-dir`, which every benchmark accepts."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes through the same code paths, done in seconds: proves the benchmark runs "
        "against the current schema; its figures are not measurements",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder of the benchmark's own embedded PostgreSQL and Redis (default: $BENCH_DATA_DIR, "
        "else .console/bench, or .console/bench-quick with --quick)",
    )


def data_dir(args: argparse.Namespace) -> Path:
    """The benchmark's data folder. Never `make run`'s `.console` itself, and quick runs get their own
    folder, so their small data sets never sit beside (or trip the row counts of) the full-size ones."""
    if args.data_dir is not None:
        return args.data_dir.resolve()
    if os.environ.get("BENCH_DATA_DIR"):
        return Path(os.environ["BENCH_DATA_DIR"]).resolve()
    return ROOT / ".console" / ("bench-quick" if args.quick else "bench")


def setup_django(data: Path) -> str:
    """Point Django at the benchmark data folder, start its database, migrate; return DATABASE_URL.

    BENCH_DATABASE_URL, when set, is used instead of the embedded database in `data`."""
    os.environ["CONSOLE_DATA_DIR"] = str(data)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    # Benchmarks measure the console, not the per-token rate limit: their tokens make thousands of
    # calls a minute (here and in the servers they start, which inherit the environment).
    os.environ.setdefault("API_TOKEN_RATE_PER_MINUTE", "0")
    from console import embedded

    # The owner role: benchmarks VACUUM and reset sequences, which the app role may not.
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or embedded.postgres_owner_url(data)
    if not os.environ.get("CELERY_BROKER_URL"):
        # A real broker, as under `make run`: requests publish their jobs (no worker consumes them here).
        _held.append(embedded.start_redis(data))
        os.environ["CELERY_BROKER_URL"] = embedded.redis_url(data)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return os.environ["DATABASE_URL"]


def bench_reviewer():
    """The benchmarks' reader of every route (role reviewer), created on first use."""
    from audit.services import Actor
    from console.accounts import services as accounts

    actor = Actor.system("bench")
    user = accounts.user_ensure(actor=actor, username="bench-stats-reader")
    if not user.grants.exists():
        accounts.role_grant(actor=actor, user=user, role="reviewer")
    return user


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WebServer:
    """gunicorn serving the console on a loopback port that stays the same across `stop()` and
    `start()`, so a client keeps its URL while the console is down (bench/client.py's kill test)."""

    def __init__(self, *, workers: int = 2, threads: int = 2, port: int | None = None) -> None:
        self.workers, self.threads = workers, threads
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "console.wsgi",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.workers),
                "--threads",
                str(self.threads),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=dict(os.environ),
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=1)
                break
            except urllib.error.HTTPError:
                break  # 503 (no broker) still means the server answers
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop(kill=True)
                    raise RuntimeError("benchmark web server did not start") from None
                time.sleep(0.2)

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM (gunicorn finishes the requests in flight), or SIGKILL to every process of the
        server at once (`kill`): requests in flight are cut off, as in a crash."""
        if self.process is None:
            return
        # The server stays in the benchmark's process group (bench/run_all.py stops a late benchmark's
        # group), so a kill names the master and its workers one by one.
        pids = [self.process.pid, *_children(self.process.pid)] if kill else []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not kill:
            self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@contextmanager
def web_server(*, workers: int = 2, threads: int = 2):
    """gunicorn serving the console on a free loopback port, for the length of the block."""
    server = WebServer(workers=workers, threads=threads)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def passage_dictionary_ready() -> bool:
    """Build the passage dictionary from the passages stored so far, in this process, if there is
    none yet; whether one is in use now. A console's worker builds it from its first passages
    (console/ledger/services.py: once some 64,000 characters are stored), so a live console
    compresses passages with it within seconds of its first batches. A benchmark that times ingest
    with no worker running would otherwise time every batch with the zlib fallback of those first
    batches (about a sixth of a 500-decision batch on storage.py's passages), and its raw COPY,
    which compresses untimed, with whatever the database held at the time."""
    from audit.services import Actor
    from console.ledger.compression import dictionaries_forget, newest_dictionary
    from console.ledger.models import PassageDictionary
    from console.ledger.services import passage_dictionary_build

    if not PassageDictionary.objects.exists():
        passage_dictionary_build(actor=Actor.system("bench"))
    dictionaries_forget()  # this process's "none yet" answer is remembered for a second
    return newest_dictionary() is not None


def month_partitions(cursor, moments) -> None:
    """Create the month partitions that rows about to be COPYed need: the decisions and their
    per-decision tables are partitioned by month (console/ledger/partitions.py), and ingest makes
    them as it goes, which a raw COPY does not."""
    from console.core.partitions import months_ensure

    months_ensure(moments, cursor=cursor)


def report(name: str, lines: list[str]) -> None:
    print(f"== {name}")
    for line in lines:
        print("   " + line)
    sys.stdout.flush()


def demo_workload(count: int, prefix: str, *, route: str = "bench") -> list[dict]:
    """The demo's decisions on `route`, each passage made unique: short, repetitive texts that
    deflate to a tenth, so they flatter every step that reads or compresses text."""
    from console.review.demo import demo_records

    records = list(demo_records(route, count, prefix=prefix, passages_per_decision=5))
    for record in records:
        for passage in record["passages"]:
            passage["text"] += f" (ref {record['request_id']}/{passage['rank']})"
    return records


def realistic_workload(count: int, prefix: str) -> list[dict]:
    """`storage.py`'s decisions on route `bench`: a question of about 80 characters, an answer of
    about 200, 5 passages of about 500 in varied words, a fifth of them from a pool of popular
    chunks (the items issue 36 measured against Label Studio with)."""
    from storage import workload

    records = workload(count, prefix)
    for record in records:
        record["route"] = "bench"
    return records


WORKLOADS = {"realistic": realistic_workload, "demo": demo_workload}


def add_workload_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload",
        choices=sorted(WORKLOADS),
        default="realistic",
        help="realistic (default): storage.py's items, varied words; demo: the demo's short, "
        "repetitive texts (the figures before 2026-12-04's second session)",
    )
