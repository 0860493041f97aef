"""Where PostgreSQL's client backends spend a run: pg_stat_activity, sampled.

Run it beside a benchmark (or `make run`) on the same data folder:

    .venv/bin/python bench/backends.py --data-dir DIR [--seconds 120] [--interval 0.05] [--top 30]

It starts nothing. It waits for the folder's server to take connections on its socket, so it can be
started before the benchmark that starts the server. Then it reads every client backend that is not
idle, every `--interval` seconds, until `--seconds` have passed or it is stopped (Ctrl-C or
SIGTERM). It prints each pair of (what the backend waits on, the start of its statement) by its
share of the samples; `--database-url` reads another server instead.

How to read the first column:

* `CPU`: the backend was running, with nothing to wait on.
* `Client/ClientRead` on an active backend: a COPY waiting for rows from its client (the Python
  side making them).
* `Client/ClientRead` on an idle-in-transaction backend: a client working while it holds a
  transaction open; the statement is its last one.
* `Lock/...` and `LWLock/...`: waits on another backend.

Issue 36's sixth session found with it that a hash index on the decisions' request id made ingest's
look-up of a batch's request ids the largest PostgreSQL cost while other batches wrote
(bench/README.md).
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from common import ROOT  # noqa: F401  (puts the project on sys.path for console.embedded)
from psycopg.conninfo import make_conninfo

STATEMENT_CHARACTERS = 60
CONNECT_TIMEOUT = 600.0  # seconds to wait for the server to take connections

_SAMPLE = """
SELECT coalesce(wait_event_type || '/' || wait_event, 'CPU'), state,
       left(regexp_replace(query, '\\s+', ' ', 'g'), %s)
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle'
"""


@dataclass
class Samples:
    """How many times the backends were read, and how often each (wait, state, statement) was seen."""

    taken: int = 0
    seen: Counter = field(default_factory=Counter)

    def lines(self, top: int) -> list[str]:
        """The `top` most seen, each with its share of the samples (a share above 100% is more than
        one backend doing the same, on average)."""
        if not self.taken:
            return ["no sample was taken"]
        lines = [f"{self.taken:,} samples; share = times seen / samples"]
        for (wait, state, statement), times in self.seen.most_common(top):
            lines.append(f"{times / self.taken:7.1%} {wait:<24} {state:<20} {statement}")
        return lines


def sample(connection: psycopg.Connection, *, seconds: float, interval: float, stop: threading.Event) -> Samples:
    """Read the backends every `interval` seconds for `seconds`, until `stop` is set, or until the
    server goes away (a benchmark that ended stops its server): what was seen until then."""
    samples = Samples()
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            rows = connection.execute(_SAMPLE, [STATEMENT_CHARACTERS]).fetchall()
        except psycopg.OperationalError:
            break
        samples.taken += 1
        samples.seen.update((wait, state, statement or "") for wait, state, statement in rows)
        stop.wait(interval)
    return samples


def connect(conninfo: str, *, stop: threading.Event, timeout: float = CONNECT_TIMEOUT) -> psycopg.Connection:
    """A connection to `conninfo` as soon as the server takes one, trying twice a second."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return psycopg.connect(conninfo, autocommit=True)
        except psycopg.OperationalError:
            if stop.is_set() or time.monotonic() > deadline:
                raise
            stop.wait(0.5)


def folder_conninfo(data: Path) -> str:
    """The embedded server of a data folder, through the socket it keeps in its cluster folder, as the
    cluster's superuser (console/embedded.py starts it so)."""
    from console.embedded import SUPERUSER

    return make_conninfo(host=str(data.resolve() / "pg"), user=SUPERUSER, dbname="postgres")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", type=Path, help="a benchmark's (or make run's) data folder")
    where.add_argument("--database-url", help="any PostgreSQL server instead")
    parser.add_argument("--seconds", type=float, default=3600.0, help="longest sampling, s (default 3600)")
    parser.add_argument("--interval", type=float, default=0.05, help="between samples, s (default 0.05)")
    parser.add_argument("--top", type=int, default=30, help="lines printed (default 30)")
    args = parser.parse_args()

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    conninfo = args.database_url or folder_conninfo(args.data_dir)
    connection = connect(conninfo, stop=stop)
    samples = sample(connection, seconds=args.seconds, interval=args.interval, stop=stop)
    connection.close()
    print("\n".join(samples.lines(args.top)))


if __name__ == "__main__":
    main()
