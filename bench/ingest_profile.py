"""Where the milliseconds of one ingest request go: a 500-decision batch, end to end, in process.

The request goes through Django's whole stack (middleware, token, parser, view, service, commit)
on the benchmark's own embedded PostgreSQL. Each step's function is wrapped with a timer (no
profiler: cProfile's cost per call doubled the Python steps' share), and the figures are the
median per batch. The SQL lines are the time each statement kind spends from its send to its
result on the client (its work in PostgreSQL plus one loopback round trip), summed per batch; the
COPY statements go to psycopg directly and are counted in the step that runs them. The CPU lines
are the CPU time a batch cost this process and its PostgreSQL backend (read from /proc): on a
machine shared with other work, a step's time moves with it more than the CPU a batch takes does.

    .venv/bin/python bench/ingest_profile.py [--batches 8] [--size 500] [--data-dir DIR] [--cprofile]
                                              [--no-dictionary]

Passages are compressed as a live console compresses them, with the dictionary its worker builds
from the first passages (built here from the warm-up batch when the folder has none);
`--no-dictionary` times a console's first batches instead, before it has one (the zlib fallback).
`--cprofile` also prints the 25 functions with the most time of their own (cProfile, one batch).
Not part of run_all.py: a tool for reading where time goes, not a figure with a target.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
import uuid
from collections import defaultdict
from pathlib import Path

from common import (
    WORKLOADS,
    add_arguments,
    add_workload_argument,
    data_dir,
    passage_dictionary_ready,
    report,
    setup_django,
)

# (phase, object, attribute): the time spent in that callable is the phase. Steps the service calls
# are wrapped where it looks them up (its module's namespace).
PHASES = [
    ("JSON parse", "console.core.parsers:SafeJSONParser", "parse"),
    ("validation", "console.ledger.apis", "validate_batch"),
    ("  of which hashing", "console.ledger.validation", "_fill_hashes"),
    ("routes and permissions", "console.ledger.services", "routes_for_items"),
    ("service (transaction and commit)", "console.ledger.services", "decision_ingest"),
    ("  one attempt, in the transaction", "console.ledger.services", "_ingest_once"),
    ("    stored-request look-up", "console.ledger.services", "_existing_hashes"),
    ("    month partitions", "console.ledger.services", "months_ensure"),
    ("    passages: dedupe, deflate, COPY", "console.ledger.services", "_store_passages"),
    ("      of which deflate", "console.ledger.services", "compress_text"),
    ("    ids drawn", "console.ledger.services", "_allocate_ids"),
    ("    audit event", "console.ledger.services", "audit_record_many"),
    ("    in-ingest writers (pool, vectors)", "console.ledger.services", "run_in_ingest"),
    ("    jobs queued", "console.ledger.services", "queue_after_ingest"),
]
# Figures worked out from the others: (name, total, parts subtracted).
DERIVED = [
    (
        "    COPY request keys, decisions, links",
        "  one attempt, in the transaction",
        [name for name, _, _ in PHASES[6:9] + PHASES[10:14]],
    ),
    ("  commit and the rest of the service", "service (transaction and commit)", ["  one attempt, in the transaction"]),
    (
        "HTTP/Django/DRF: middleware, token, response",
        "request, end to end",
        ["JSON parse", "validation", "routes and permissions", "service (transaction and commit)"],
    ),
]


class Timers:
    """Wraps each phase's callable; seconds spent in each, reset per batch. A phase that calls
    itself (none here) would be counted once per level."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def install(self) -> None:
        import importlib

        for name, target, attribute in PHASES:
            module_name, _, class_name = target.partition(":")
            owner = importlib.import_module(module_name)
            if class_name:
                owner = getattr(owner, class_name)
            original = getattr(owner, attribute, None)
            if original is None:  # a step this tree does not have
                continue
            setattr(owner, attribute, self._timed(name, original))

    def _timed(self, name, original):
        seconds = self.seconds

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - started

        return timed


class StatementTimer:
    """A Django execute wrapper: seconds per statement kind (its first words), per batch."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            kind = " ".join(sql.split()[:4])[:70]
            self.seconds[kind] += time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--size", type=int, default=500)
    parser.add_argument("--cprofile", action="store_true", help="also print one batch's cProfile, by own time")
    parser.add_argument(
        "--no-dictionary",
        action="store_true",
        help="time a fresh folder's batches before the passage dictionary exists (default: build it first)",
    )
    add_workload_argument(parser)
    add_arguments(parser)
    args = parser.parse_args()
    records = WORKLOADS[args.workload]
    setup_django(data_dir(args))

    from django.db import connection
    from django.test import Client

    from audit.services import Actor
    from console.accounts import services as accounts
    from console.accounts.models import Route
    from console.accounts.services import route_create
    from console.ledger.models import PassageDictionary

    actor = Actor.system("bench")
    if not Route.objects.filter(slug="bench").exists():
        route_create(actor=actor, slug="bench", name="Benchmark")
    user = accounts.user_ensure(actor=actor, username="bench-integrator")
    accounts.role_grant(actor=actor, user=user, role="integrator")
    token = accounts.token_issue(actor=actor, user=user).key
    client = Client(HTTP_AUTHORIZATION=f"Token {token}", HTTP_HOST="127.0.0.1")
    run = uuid.uuid4().hex[:8]

    def post(body: bytes):
        response = client.post("/api/v1/decisions", data=body, content_type="application/json")
        assert response.status_code == 201, response.content[:300]

    if args.no_dictionary and PassageDictionary.objects.exists():
        raise RuntimeError("--no-dictionary needs a data folder without a passage dictionary")
    post(json.dumps({"decisions": records(args.size, f"prof-warm-{run}")}).encode())
    dictionary = "none (zlib)" if args.no_dictionary else "trained (zstd)"
    if not args.no_dictionary and not passage_dictionary_ready():
        raise RuntimeError("no passage dictionary could be built from the warm-up batch")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    cpu: dict[str, list[float]] = defaultdict(list)
    timers = Timers()
    timers.install()
    per_phase: dict[str, list[float]] = defaultdict(list)
    per_sql: dict[str, list[float]] = defaultdict(list)
    for n in range(args.batches):
        body = json.dumps({"decisions": records(args.size, f"prof-{run}-{n}")}).encode()
        timers.seconds.clear()
        statements = StatementTimer()
        with connection.execute_wrapper(statements):
            own, theirs = time.process_time(), backend_cpu_seconds(backend)
            started = time.perf_counter()
            post(body)
            timers.seconds["request, end to end"] = time.perf_counter() - started
            cpu["this process (Django)"].append(time.process_time() - own)
            cpu["its PostgreSQL backend"].append(backend_cpu_seconds(backend) - theirs)
        for name, total, parts in DERIVED:
            timers.seconds[name] = timers.seconds[total] - sum(timers.seconds[part] for part in parts)
        for name in ["request, end to end", *(name for name, _, _ in PHASES), *(name for name, _, _ in DERIVED)]:
            per_phase[name].append(timers.seconds[name])
        for kind, seconds in statements.seconds.items():
            per_sql[kind].append(seconds)
    wall = statistics.median(per_phase["request, end to end"]) * 1000
    order = [name for name, _, _ in PHASES]
    order.insert(order.index("    audit event"), DERIVED[0][0])  # in the order the service runs them
    order.append(DERIVED[1][0])
    order.append(DERIVED[2][0])
    lines = [
        f"{args.batches} batches of {args.size} decisions (5 passages each, {args.workload} workload), "
        f"median per batch; passage dictionary: {dictionary}; load average {os.getloadavg()[0]:.1f}",
        f"request, end to end: {wall:.1f} ms = {args.size / wall * 1000:,.0f} decisions/s on one thread",
        "step                                            ms   share",
    ]
    for name in order:
        ms = statistics.median(per_phase[name]) * 1000
        lines.append(f"{name:<46} {ms:6.1f}  {ms / wall:6.1%}")
    lines.append("CPU time per batch (user + system), ms: less moved by other work on the machine than the times above")
    for name, values in cpu.items():
        lines.append(f"  {statistics.median(values) * 1000:7.1f}  {name}")
    lines.append("SQL through Django's cursor (send to result), ms per batch (COPY not included):")
    for kind, values in sorted(per_sql.items(), key=lambda kv: -statistics.median(kv[1]))[:15]:
        lines.append(f"  {statistics.median(values) * 1000:7.2f}  {kind}")
    report("ingest profile", lines)
    if args.cprofile:
        profile = cProfile.Profile()
        body = json.dumps({"decisions": records(args.size, f"prof-c-{run}")}).encode()
        profile.enable()
        post(body)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def backend_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process has used, from /proc (the backend runs on this machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
