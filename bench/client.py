"""The official client (clients/python): its cost on the answering path, its throughput into a
running console, and a kill test.

1. Overhead: `Console.record()` timed on the calling thread, one call at a time at a steady rate
   (RECORD_RATE a second) while the client's background sender posts to the console; the baseline
   is `json.dumps` of the same decisions at the same rate, the least an application that logs its
   decisions does (record() serialises the decision too, then queues it). Each decision has 5
   passages. Target: p99 of record() under 1 ms. The client's queue holds the whole run: faster
   than the console ingests, a full queue spools each call to disk (an fsync'd append), timed on
   a line of its own with a queue of one.
2. Throughput: half as many decisions recorded as fast as the loop goes and sent by the client's
   one sender thread (batches of 500, `max_queue` large enough to hold the run, so the sender is
   measured and not the spool), from the first record() until flush() returns; the baseline is one
   thread posting batches of 500 as JSON with httpx, each body encoded in the timed loop. PAIRS
   pairs of runs, alternating which side goes first; the ratio is the median of the pairs' ratios.
   Target: at least 0.8 of the raw rate.
3. Kill test: STREAM decisions recorded at a steady rate; a fifth into the stream every process of
   the console (gunicorn master and workers) is killed with SIGKILL, cutting off any request in
   flight, and started again on the same port DOWN seconds later; the stream goes on throughout.
   After flush(), the database must hold every request_id of the stream exactly once, with no dead
   letters and an empty spool. The client's default retry schedule (backoff to 30 s) is used, so
   the time from restart to all stored includes its last wait.

    .venv/bin/python bench/client.py [--decisions 20000] [--stream 10000] [--down 30] [--quick] [--data-dir DIR]

`--quick`: 2,000 decisions for 1, one pair of 2,000 for 2, a stream of 2,000 with the console down
for 3 s (not 30).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from statistics import median, quantiles

from common import ROOT, WebServer, add_arguments, data_dir, demo_workload, report, setup_django

sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))  # the client as `make` installs it, -e

import httpx  # noqa: E402
from abstention_console import Console  # noqa: E402

ROUTE = "bench-client"
BATCH = 500
RECORD_RATE = 2_000  # record() calls a second in the overhead run: a busy answering service
DECISIONS, QUICK_DECISIONS = 20_000, 2_000
PAIRS = 3  # throughput runs of the client and of raw HTTP, alternating
SPOOLED = 2_000  # record() calls timed with the queue full
STREAM, QUICK_STREAM = 10_000, 2_000
DOWN, QUICK_DOWN = 30.0, 3.0
FLUSH_TIMEOUT = 300.0


def make_records(count: int, prefix: str) -> list[dict]:
    return demo_workload(count, prefix, route=ROUTE)


class CountingTransport(httpx.HTTPTransport):
    """httpx's transport, counting what the console answered to each ingest call."""

    def __init__(self) -> None:
        super().__init__()
        self.created = self.unchanged = self.failed = 0
        self.statuses: dict[int, int] = {}
        self.in_flight = threading.Event()  # set while an ingest call waits for its answer
        self.last_seconds = 0.1  # how long the last answered ingest call took

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter()
        self.in_flight.set()
        try:
            response = super().handle_request(request)
        except httpx.TransportError:
            self.failed += 1
            raise
        finally:
            self.in_flight.clear()
        self.last_seconds = time.perf_counter() - started
        self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1
        if request.url.path == "/api/v1/decisions" and response.status_code == 201:
            body = json.loads(response.read())
            self.created += body.get("created", 0)
            self.unchanged += body.get("unchanged", 0)
        return response


def percentiles_ms(durations_ns: list[int]) -> tuple[float, float]:
    cuts = quantiles(durations_ns, n=100, method="inclusive")
    return cuts[49] / 1e6, cuts[98] / 1e6


def paced(count: int, rate: float, call) -> list[int]:
    """Call `call(i)` for i in range(count) at `rate` calls a second; each call's duration in ns."""
    durations = []
    started = time.perf_counter()
    for i in range(count):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        t0 = time.perf_counter_ns()
        call(i)
        durations.append(time.perf_counter_ns() - t0)
    return durations


def overhead(url: str, token: str, spool: Path, count: int, run: str) -> list[str]:
    records = make_records(count, f"overhead-{run}")
    baseline = [make_records(count, f"baseline-{run}") for _ in range(2)]
    dumps_before = paced(count, RECORD_RATE, lambda i: json.dumps(baseline[0][i]))
    # A queue that holds the run: at RECORD_RATE the console here ingests less than the calls arrive
    # (about 500/s on 2 shared cores), and with the default queue the surplus would be spooled,
    # which is measured apart below.
    with Console(url, token, spool_dir=spool / "overhead", max_queue=count) as console:
        recorded = paced(count, RECORD_RATE, lambda i: console.record(records[i]))
        if not console.flush(timeout=FLUSH_TIMEOUT):
            raise RuntimeError("the overhead run's decisions were not all stored")
    dumps_after = paced(count, RECORD_RATE, lambda i: json.dumps(baseline[1][i]))
    full = min(count, SPOOLED)
    spooled_records = make_records(full, f"spooled-{run}")
    with Console(url, token, spool_dir=spool / "spooled", max_queue=1) as console:
        spooled = paced(full, RECORD_RATE, lambda i: console.record(spooled_records[i]))
        if not console.flush(timeout=FLUSH_TIMEOUT):
            raise RuntimeError("the spooled run's decisions were not all stored")
    record_p50, record_p99 = percentiles_ms(recorded)
    dumps_p50, dumps_p99 = min(percentiles_ms(dumps_before), percentiles_ms(dumps_after), key=lambda p: p[1])
    spooled_p50, spooled_p99 = percentiles_ms(spooled)
    ratio = record_p99 / dumps_p99
    return [
        f"record() on the calling thread : p50 {record_p50:.3f} ms  p99 {record_p99:.3f} ms  "
        f"({count:,} calls at {RECORD_RATE:,}/s, the sender posting to the console)",
        f"json.dumps of the same decision: p50 {dumps_p50:.3f} ms  p99 {dumps_p99:.3f} ms  (the faster of two runs)",
        f"ratio record()/json.dumps, p99 : {ratio:.2f}",
        f"record() p99 under 1 ms        : {'PASS' if record_p99 < 1.0 else 'FAIL'}",
        f"record() with the queue full   : p50 {spooled_p50:.3f} ms  p99 {spooled_p99:.3f} ms  "
        f"({full:,} calls, each an fsync'd append to the spool)",
    ]


def raw_batches(url: str, token: str, records: list[dict]) -> float:
    """Seconds to post `records` in batches of BATCH from one thread, each body encoded in the loop."""
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        started = time.perf_counter()
        for i in range(0, len(records), BATCH):
            body = json.dumps({"decisions": records[i : i + BATCH]}).encode()
            response = http.post("/api/v1/decisions", content=body)
            if response.status_code != 201:
                raise RuntimeError(f"raw batch refused: {response.status_code} {response.text[:200]}")
        return time.perf_counter() - started


def client_run(url: str, token: str, spool: Path, records: list[dict]) -> tuple[float, CountingTransport]:
    """Seconds from the first record() until flush() returns, the sender's answers counted."""
    transport = CountingTransport()
    with Console(url, token, spool_dir=spool, max_queue=len(records), transport=transport) as console:
        started = time.perf_counter()
        for record in records:
            console.record(record)
        if not console.flush(timeout=FLUSH_TIMEOUT):
            raise RuntimeError("the throughput run's decisions were not all stored")
        return time.perf_counter() - started, transport


def throughput(url: str, token: str, spool: Path, count: int, pairs: int, run: str) -> list[str]:
    """`pairs` runs of each, alternating which goes first; the median of the pairs' ratios, so the
    load of a shared machine drifting between runs weighs on both sides of each ratio."""
    client_seconds, raw_seconds, requests = [], [], 0
    for pair in range(pairs):
        records = {side: make_records(count, f"{side}-{pair}-{run}") for side in ("client", "raw")}
        for side in ("client", "raw") if pair % 2 else ("raw", "client"):
            if side == "raw":
                raw_seconds.append(raw_batches(url, token, records["raw"]))
            else:
                seconds, transport = client_run(url, token, spool / f"throughput-{pair}", records["client"])
                client_seconds.append(seconds)
                requests += sum(transport.statuses.values())
    ratio = median(raw / client for raw, client in zip(raw_seconds, client_seconds, strict=True))
    client_rate, raw_rate = count / median(client_seconds), count / median(raw_seconds)
    runs = f"{pairs} runs" if pairs > 1 else "1 run"
    return [
        f"client into the console       : {client_rate:9,.0f} decisions/s (median of {runs} of {count:,}, "
        f"{requests} requests in all)",
        f"raw batched HTTP (httpx, {BATCH})  : {raw_rate:9,.0f} decisions/s (median of {runs})",
        f"ratio client/raw              : {ratio:.2f}  (median of the pairs' ratios "
        f"{', '.join(f'{raw / client:.2f}' for raw, client in zip(raw_seconds, client_seconds, strict=True))}; "
        f"target >= 0.8) {'PASS' if ratio >= 0.8 else 'FAIL'}",
    ]


def kill_test(
    server: WebServer, token: str, spool: Path, route_id: int, count: int, down: float, run: str
) -> list[str]:
    from django.db import connection

    prefix = f"stream-{run}-"
    records = make_records(count, prefix)
    rate = count / (down * 2.5)  # the stream outlasts the outage: a fifth before it, two fifths after
    stop_after = down * 0.5
    moments: dict[str, float] = {}

    def outage(started: float) -> None:
        time.sleep(max(0.0, started + stop_after - time.perf_counter()))
        # Kill while an ingest call is in flight, at a random point of it: its batch may be stored
        # with the answer lost (the client sends it again, answered "unchanged") or not stored at all.
        moments["cut_off"] = transport.in_flight.wait(timeout=10)
        time.sleep(random.uniform(0, transport.last_seconds))
        moments["killed"] = time.perf_counter()
        server.stop(kill=True)
        time.sleep(max(0.0, moments["killed"] + down - time.perf_counter()))
        moments["restarting"] = time.perf_counter()
        server.start()
        moments["answering"] = time.perf_counter()

    transport = CountingTransport()
    spool_dir = spool / "kill"
    with Console(server.url, token, spool_dir=spool_dir, transport=transport) as console:
        started = time.perf_counter()
        outage_thread = threading.Thread(target=outage, args=(started,), daemon=True)
        outage_thread.start()
        recorded_at = []

        def record(i: int) -> None:
            console.record(records[i])
            recorded_at.append(time.perf_counter())

        durations = paced(count, rate, record)
        outage_thread.join()
        stream_end = time.perf_counter()
        flushed = console.flush(timeout=FLUSH_TIMEOUT)
        stored_at = time.perf_counter()
        dead_letters = console.dead_letter_path.read_text().count("\n") if console.dead_letter_path.exists() else 0
    spooled_left = sum(path.stat().st_size for path in spool_dir.glob("spool-*.jsonl"))
    while_down = sum(1 for t in recorded_at if moments["killed"] <= t < moments["answering"])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT request_id, count(*) FROM ledger_decision WHERE route_id = %s AND request_id LIKE %s "
            "GROUP BY request_id",
            [route_id, prefix + "%"],
        )
        stored = dict(cursor.fetchall())
    sent = {record["request_id"] for record in records}
    missing = len(sent - stored.keys())
    duplicates = sum(n - 1 for n in stored.values())
    extra = len(stored.keys() - sent)
    exact = flushed and missing == duplicates == extra == dead_letters == spooled_left == 0
    record_p99 = percentiles_ms(durations)[1]
    lines = [
        f"kill test: {count:,} decisions at {rate:,.0f}/s; console SIGKILLed "
        f"{moments['killed'] - started:.1f} s in{' during an ingest call' if moments['cut_off'] else ''}, "
        f"down {moments['restarting'] - moments['killed']:.1f} s, answering again "
        f"{moments['answering'] - moments['restarting']:.1f} s after its restart",
        f"  recorded while it was down    : {while_down:,} (record() p99 over the stream {record_p99:.3f} ms)",
        f"  stored after the stream ended : {stored_at - stream_end:.1f} s (all stored "
        f"{stored_at - moments['answering']:.1f} s after the console answered again)",
        f"  console's answers             : created {transport.created:,}, unchanged {transport.unchanged:,} "
        f"(replays), failed connections {transport.failed}, statuses {dict(sorted(transport.statuses.items()))}",
        f"  in the database: {len(stored):,} of {count:,} sent, missing {missing}, duplicates {duplicates}, "
        f"unknown {extra}, dead letters {dead_letters}, spool left {spooled_left} bytes: "
        f"{'PASS (every decision exactly once)' if exact else 'FAIL'}",
    ]
    if not exact:
        lines.append("!! wrong answer: the kill test lost or repeated decisions")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, help=f"overhead and throughput runs, default {DECISIONS:,}")
    parser.add_argument("--stream", type=int, help=f"decisions in the kill test, default {STREAM:,}")
    parser.add_argument("--down", type=float, help=f"seconds the console is down in the kill test, default {DOWN:.0f}")
    add_arguments(parser)
    args = parser.parse_args()
    decisions = args.decisions or (QUICK_DECISIONS if args.quick else DECISIONS)
    stream = args.stream or (QUICK_STREAM if args.quick else STREAM)
    down = args.down or (QUICK_DOWN if args.quick else DOWN)
    # Throughput: several shorter pairs rather than one long one (a shared machine's load drifts).
    throughput_size, pairs = (decisions, 1) if args.quick else (max(BATCH, decisions // 2), PAIRS)
    folder = data_dir(args)
    setup_django(folder)

    from audit.services import Actor
    from console.accounts import services as accounts
    from console.accounts.models import Route
    from console.accounts.services import route_create

    actor = Actor.system("bench")
    route = Route.objects.filter(slug=ROUTE).first() or route_create(actor=actor, slug=ROUTE, name="Client benchmark")
    user = accounts.user_ensure(actor=actor, username="bench-client-integrator")
    accounts.role_grant(actor=actor, user=user, role="integrator")
    token = accounts.token_issue(actor=actor, user=user).key

    run = uuid.uuid4().hex[:8]
    spool = folder / f"client-spool-{run}"
    server = WebServer(workers=1 if args.quick else 2, threads=2)
    server.start()
    try:
        lines = [f"decisions: {decisions:,} with 5 passages each; kill test stream {stream:,}, down {down:.0f} s"]
        lines += overhead(server.url, token, spool, decisions, run)
        lines += throughput(server.url, token, spool, throughput_size, pairs, run)
        lines += kill_test(server, token, spool, route.pk, stream, down, run)
        lines.append(f"load average                  : {os.getloadavg()[0]:.2f}")
    finally:
        server.stop()
    report("client", lines)
    failed = any(line.startswith("!!") for line in lines)
    if not failed:
        shutil.rmtree(spool, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
