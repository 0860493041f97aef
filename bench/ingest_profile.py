"""Where the milliseconds of one ingest request go: a 500-decision batch, end to end, in process.

The request goes through Django's whole stack (middleware, token, parser, view, service, commit)
on the benchmark's own embedded PostgreSQL, under cProfile; the phases are the cumulative time of
the functions that do each step, per batch (median over the batches). The SQL side is the time
each statement kind spends from its send to its result on the client (the statement's own work
plus one loopback round trip), summed per batch.

    .venv/bin/python bench/ingest_profile.py [--batches 8] [--size 500] [--data-dir DIR]

Not part of run_all.py: a tool for reading where time goes, not a figure with a target.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
import uuid
from collections import defaultdict

from common import add_arguments, data_dir, report, setup_django

# (phase, module path fragment, function name): the cumulative time of that function is the phase.
PHASES = [
    ("Django's handler (the whole request)", "django/core/handlers/base.py", "get_response"),
    ("JSON parse", "console/core/parsers.py", "parse"),
    ("validation + hashing", "console/ledger/validation.py", "validate_batch"),
    ("  of which hashing", "console/ledger/validation.py", "_fill_hashes"),
    ("routes and permissions", "console/ledger/services.py", "routes_for_items"),
    ("service (transaction, commit)", "console/ledger/services.py", "decision_ingest"),
    ("  one attempt (in the transaction)", "console/ledger/services.py", "_ingest_once"),
    ("  stored-request look-up", "console/ledger/services.py", "_existing_hashes"),
    ("  month partitions", "console/core/partitions.py", "months_ensure"),
    ("  passages (dedupe, deflate, COPY)", "console/ledger/services.py", "_store_passages"),
    ("    of which deflate", "console/ledger/compression.py", "compress_text"),
    ("  ids drawn", "console/ledger/services.py", "_allocate_ids"),
    ("  audit event", "audit/services.py", "audit_record_many"),
    ("  in-ingest writers (vectors, pool)", "console/ledger/hooks.py", "run_in_ingest"),
    ("  jobs published", "console/ledger/hooks.py", "queue_after_ingest"),
    ("  commit", "django/db/backends/base/base.py", "commit"),
    ("COPY rows written (write_row)", "psycopg/_copy.py", "write_row"),
    ("COPY ends (server work)", "psycopg/_copy.py", "__exit__"),
    ("response", "rest_framework/response.py", "rendered_content"),
]


def records(count: int, prefix: str) -> list[dict]:
    from console.review.demo import demo_records

    out = list(demo_records("bench", count, prefix=prefix, passages_per_decision=5))
    for rec in out:
        for passage in rec["passages"]:
            passage["text"] += f" (ref {rec['request_id']}/{passage['rank']})"
    return out


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
    add_arguments(parser)
    args = parser.parse_args()
    setup_django(data_dir(args))

    from django.db import connection
    from django.test import Client

    from audit.services import Actor
    from console.accounts import services as accounts
    from console.accounts.models import Route
    from console.accounts.services import route_create

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

    post(json.dumps({"decisions": records(args.size, f"prof-warm-{run}")}).encode())
    per_phase: dict[str, list[float]] = defaultdict(list)
    per_sql: dict[str, list[float]] = defaultdict(list)
    plain = []
    for n in range(args.batches):  # unprofiled: the wall time without cProfile's cost
        body = json.dumps({"decisions": records(args.size, f"prof-plain-{run}-{n}")}).encode()
        started = time.perf_counter()
        post(body)
        plain.append(time.perf_counter() - started)
    walls = []
    for n in range(args.batches):
        body = json.dumps({"decisions": records(args.size, f"prof-{run}-{n}")}).encode()
        timer = StatementTimer()
        profile = cProfile.Profile()
        with connection.execute_wrapper(timer):
            started = time.perf_counter()
            profile.enable()
            post(body)
            profile.disable()
            walls.append(time.perf_counter() - started)
        stats = pstats.Stats(profile).stats
        for name, fragment, function in PHASES:
            total = sum(
                cumtime
                for (path, _, func), (_, _, _, cumtime, _) in stats.items()
                if func == function and path.endswith(fragment)
            )
            per_phase[name].append(total)
        for kind, seconds in timer.seconds.items():
            per_sql[kind].append(seconds)
    wall = statistics.median(walls) * 1000
    bare = statistics.median(plain) * 1000
    lines = [
        f"{args.batches} batches of {args.size} decisions (5 passages each), median per batch",
        f"unprofiled: {bare:.1f} ms a batch = {args.size / bare * 1000:,.0f} decisions/s on one thread",
        f"profiled:   {wall:.1f} ms a batch (cProfile's cost included; the shares below are of this)",
        "phase                                    ms    share",
    ]
    for name, _, _ in PHASES:
        ms = statistics.median(per_phase[name]) * 1000
        lines.append(f"{name:<38} {ms:7.1f}  {ms / wall:6.1%}")
    lines.append("SQL through Django's cursor (send to result), ms per batch:")
    for kind, values in sorted(per_sql.items(), key=lambda kv: -statistics.median(kv[1])):
        lines.append(f"  {statistics.median(values) * 1000:7.2f}  {kind}")
    report("ingest profile", lines)


if __name__ == "__main__":
    main()
