"""Ingest throughput: POST /api/v1/decisions against a raw COPY of the same rows.

Decisions carry 5 passages each. `--workload realistic` (the default) is `storage.py`'s items, the
ones issue 36 measured against Label Studio: a question of ~80 characters, an answer of ~200, 5
passages of ~500 in varied words, a fifth of them from a pool of popular chunks; `--workload demo`
is the demo's short, repetitive texts (every passage made unique), which the figures before
2026-12-04's second session used: they compress ten times over and flatter ingest. The API side is
2 concurrent clients posting batches of 500 to gunicorn over loopback; the baseline is psycopg's
COPY of the same rows into the same three tables (passages, decisions, links), timed on the COPY
statements alone. Target (issue 36): the API reaches at least 60% of the COPY rate. Both store
passages as a live console does, compressed with the dictionary its worker builds from the first
passages (built here from a first COPY on a fresh folder): with no worker running, the API would
otherwise compress every passage with the zlib fallback of a console's first batches.

"Until gradable" runs real Celery workers as `make run` starts them (console/run.py: one of
CELERY_CONCURRENCY or 2 processes on the gradable path, span checks and the pool sweeper, since ready
decisions enter the pool in their ingest transaction; one process, at make run's lower CPU priority,
on every other queue; `--one-worker` puts every queue on a single worker instead) during the API run
and times from the first POST until the last decision of the run has its span checks done (a
DecisionSupport row) and its grading pool item: the rate at which after-ingest work keeps up with
ingest. That moment is read from the span checks' and pool items' own timestamps, once the run's
decisions (looked up by id every 50 ms while they wait) are all gradable, so neither the polls'
interval nor their cost is counted. Target: at least 0.95 of the HTTP rate of that run.
The API/COPY ratio is taken from a run with no worker running (the jobs it queues are dropped
after it), since on a small machine the workers take CPU from gunicorn; both API rates are printed.

    .venv/bin/python bench/ingest.py [--decisions 20000] [--quick] [--shared] [--data-dir DIR]
    .venv/bin/python bench/ingest.py --stream 600 [--rate N] [--sample 10] [--idle-timeout 300]

`--quick` posts 1,000 decisions (two batches) to one gunicorn worker instead: seconds, same code paths.
`--stream SECONDS` is the sustained-load mode instead: make run's workers running, batches of 500
posted at a steady rate (`--rate`, default the HTTP rate of a short burst with no worker, measured
first) for that long, the backlog sampled as it goes (`--sample` seconds apart): jobs waiting in
each queue (and taken but not finished) and the stream's decisions still without their span
checks, their pool item or a question vector from the route's current embedder. After the last
batch it reports how long until everything is idle (bounded: `--idle-timeout`). Target: the backlog
does not grow during the stream, and the console is idle within 30 s of its end.
`--shared` is the concurrency mode instead: 8 clients post batches whose passages overlap as
retrieval does (a fifth of all passages drawn from 200 popular chunks, in any order), and every
batch must be stored: the target is zero errors (no deadlock, no lost race surfacing as a 500).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from common import (
    ROOT,
    WORKLOADS,
    add_arguments,
    add_workload_argument,
    data_dir,
    month_partitions,
    passage_dictionary_ready,
    report,
    setup_django,
    web_server,
)

BATCH = 500
CLIENTS = 2
DECISIONS, QUICK_DECISIONS = 20_000, 1_000
SHARED_CLIENTS = 8
SHARED_CHUNKS = 200
SHARED_SHARE = 0.2


WORKLOAD = "realistic"  # --workload: which of common.WORKLOADS every run of this process posts and COPYs


def make_records(count: int, prefix: str) -> list[dict]:
    return WORKLOADS[WORKLOAD](count, prefix)


def share_passages(records: list[dict], run: str, *, seed: int = 11) -> None:
    """Replace about a fifth of the passages with one of SHARED_CHUNKS popular chunks (each chunk at
    most once per decision), so concurrent batches race to store the same new passages."""
    rng = random.Random(seed)
    pool = [
        {
            "id": f"kb/popular-{run}#{n}",
            "text": f"Popular chunk {n} of run {run}: open Settings, then Security.",
            "source": "knowledge-base",
            "uri": f"https://intranet.example/popular/{run}/{n}",
        }
        for n in range(SHARED_CHUNKS)
    ]
    for rec in records:
        chosen = rng.sample(pool, len(rec["passages"]))
        for passage, chunk in zip(rec["passages"], chosen, strict=True):
            if rng.random() < SHARED_SHARE:
                passage.update(chunk)


def post_all(url: str, token: str, records: list[dict], *, clients: int = CLIENTS) -> tuple[float, list[str]]:
    """Post the records in batches from `clients` threads; the time taken and every failed batch."""
    return post_bodies(url, token, encode_batches(records), clients=clients)


def encode_batches(records: list[dict]) -> list[bytes]:
    """The request bodies of the records' batches of BATCH."""
    return [json.dumps({"decisions": records[i : i + BATCH]}).encode() for i in range(0, len(records), BATCH)]


def post_bodies(url: str, token: str, bodies: list[bytes], *, clients: int = CLIENTS) -> tuple[float, list[str]]:
    """Post the bodies from `clients` threads; the time taken (from the first request, not counting
    the bodies' encoding) and every failed batch."""
    bodies = list(bodies)
    lock = threading.Lock()
    failures: list[str] = []

    def client() -> None:
        while True:
            with lock:
                if not bodies:
                    return
                body = bodies.pop()
            request = urllib.request.Request(
                url + "/api/v1/decisions",
                data=body,
                method="POST",
                headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    if response.status != 201:
                        failures.append(f"{response.status} {response.read().decode()[:200]}")
            except urllib.error.HTTPError as exc:
                failures.append(f"{exc.code} {exc.read().decode(errors='replace')[:200]}")
            except OSError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, failures


def copy_all(database_url: str, route_id: int, records: list[dict]) -> float:
    """COPY the same rows into the same tables; only the COPY statements are timed."""
    import psycopg

    from console.ledger.compression import compress_text, newest_dictionary
    from console.ledger.models import PassageOrigin, stored_ranks, uri_split
    from console.ledger.validation import validate_batch

    items, errors = validate_batch(records)
    assert not errors
    key_at = 3  # the content key's place in a passage row below
    dictionary = newest_dictionary()  # the one ingest compresses with, once the job has built it
    passages, origins = {}, {}
    for item in items:
        corpus = item.versions.get("corpus", "")
        for p in item.passages:
            uri_prefix, stored_uri = uri_split(p.uri, p.external_id)
            parts = (route_id, corpus, p.source, uri_prefix)
            if parts not in origins:  # looked up (or stored) once, not timed, as the rows refer to it
                origins[parts] = PassageOrigin.of(*parts).pk
            passages[p.content_key] = (
                p.external_id,
                compress_text(p.text, dictionary),  # stored as the service stores it (deflated when shorter)
                stored_uri,
                bytes.fromhex(p.content_key),
                origins[parts],
            )
    elapsed = 0.0
    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        # Passages stored before (the realistic workload's popular chunks) are not written again, as
        # ingest's dedupe does not write them; finding them is not timed.
        cur.execute(
            "SELECT content_key FROM ledger_passage WHERE content_key = ANY(%s)",
            [[row[key_at] for row in passages.values()]],
        )
        stored = {bytes(key) for (key,) in cur.fetchall()}
        started = time.perf_counter()
        with cur.copy("COPY ledger_passage (external_id, text, uri, content_key, origin_id) FROM STDIN") as copy:
            for row in passages.values():
                if row[key_at] not in stored:
                    copy.write_row(row)
        elapsed += time.perf_counter() - started
        cur.execute(
            "SELECT content_key, id FROM ledger_passage WHERE content_key = ANY(%s)",
            [[row[key_at] for row in passages.values()]],
        )
        passage_ids = {bytes(key).hex(): pk for key, pk in cur.fetchall()}
        month_partitions(cur, [i.occurred_at for i in items])
        # the ranked passages as arrays of the decision's row, in rank order, as ingest writes them
        # (looking the passage ids up above is not timed, as ingest's own lookups are not)
        started = time.perf_counter()
        with cur.copy("COPY ledger_requestkey (route_id, request_id) FROM STDIN") as copy:
            for i in items:
                copy.write_row((route_id, i.request_id))
        with cur.copy(
            "COPY ledger_decision (route_id, request_id, occurred_at, question, claim, gate_name, "
            "gate_score, cutoff, outcome, distinct_served_answer, versions, segments, ingested_at, content_hash, "
            "passage_ids, passage_ranks, retrieval_scores) FROM STDIN"
        ) as copy:
            for i in items:
                copy.write_row(
                    (
                        route_id,
                        i.request_id,
                        i.occurred_at,
                        i.question,
                        i.claim,
                        i.gate_name,
                        i.gate_score,
                        i.cutoff,
                        i.outcome,
                        i.distinct_served_answer,
                        json.dumps(i.versions),
                        json.dumps(i.segments),
                        i.occurred_at,
                        bytes.fromhex(i.content_hash),  # the table keeps digests as bytes, the app as hex
                        [passage_ids[p.content_key] for p in i.passages],
                        stored_ranks([p.rank for p in i.passages]),  # NULL when 1..n, as ingest writes them
                        [p.retrieval_score for p in i.passages],
                    )
                )
        elapsed += time.perf_counter() - started
        conn.commit()
    return elapsed


@contextlib.contextmanager
def celery_worker(
    folder,
    *,
    queues: tuple[str, ...] | None = None,
    name: str = "ingest-worker",
    concurrency: str | None = None,
    extra_env: dict[str, str] | None = None,
):
    """A Celery worker consuming `queues` (default every queue, as `make run` starts it; without beat:
    no sweeper re-queues anything behind the benchmark's back), stopped at the end of the block."""
    if queues is None:
        try:
            from console.core.queues import QUEUES as queues
        except ImportError:  # a tree from before the per-kind queues: everything on Celery's default queue
            queues = ("celery",)
    log = folder / f"{name}.log"
    concurrency = concurrency or os.environ.get("CELERY_CONCURRENCY", "2")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "celery"),
                "-A",
                "console",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                concurrency,
                "-Q",
                ",".join(queues),
                "--hostname",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env={**os.environ, **(extra_env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    time.sleep(0.5)
    try:
        deadline = time.monotonic() + 60
        while b" ready." not in log.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"benchmark worker did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def run_decision_ids(route_id: int, prefix: str) -> list[int]:
    """The ids of the run's decisions (one scan, once they are all stored)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM ledger_decision WHERE route_id = %s AND request_id LIKE %s", [route_id, prefix + "%"]
        )
        return [row[0] for row in cursor.fetchall()]


def not_yet_gradable(decision_ids: list[int]) -> list[int]:
    """Those of the decisions still without their span checks done (a DecisionSupport row) or their
    pool item. It runs every 50 ms while the workers finish, on the cores they finish on: each id is
    looked up by index (LATERAL, kept from flattening by OFFSET 0), so a check costs what is still
    waiting. A count over the run's request_id prefix scanned the whole ledger in three parallel
    processes, and `NOT EXISTS` on the list is planned as a hash of every row of both tables."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.id FROM unnest(%s::bigint[]) AS d(id) "
            "LEFT JOIN LATERAL (SELECT true AS done FROM verification_decisionsupport s "
            "WHERE s.decision_id = d.id OFFSET 0) AS s ON true "
            "LEFT JOIN LATERAL (SELECT true AS done FROM grading_gradingitem g "
            "WHERE g.decision_id = d.id AND NOT g.is_gold OFFSET 0) AS g ON true "
            "WHERE s.done IS NULL OR g.done IS NULL",
            [decision_ids],
        )
        return [row[0] for row in cursor.fetchall()]


GRADABLE_TIMEOUT, QUICK_GRADABLE_TIMEOUT = 1800.0, 90.0


def wait_gradable(route_id: int, prefix: str, count: int, started: float, *, timeout: float) -> float:
    """Seconds from `started` (a time.time()) until the last of the `count` decisions (all stored by
    now) became gradable: its span checks done and its pool item written, read from their own
    timestamps once every one is there. Polling for that moment instead would add the polls' own
    lag and cost (a look-up of every waiting id, on the cores the workers finish on) to the figure."""
    from django.db import connection

    ids = run_decision_ids(route_id, prefix)
    if len(ids) != count:
        raise RuntimeError(f"{len(ids)} decisions stored under {prefix!r}, {count} sent")
    waiting = ids
    while waiting := not_yet_gradable(waiting):
        if time.time() - started > timeout:
            raise RuntimeError(f"only {count - len(waiting)} of {count} gradable after {timeout} s")
        time.sleep(0.05)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT max(greatest(s.verified_at, g.created_at)) FROM unnest(%s::bigint[]) AS d(id) "
            "CROSS JOIN LATERAL (SELECT verified_at FROM verification_decisionsupport s "
            "WHERE s.decision_id = d.id OFFSET 0) AS s "
            "CROSS JOIN LATERAL (SELECT created_at FROM grading_gradingitem g "
            "WHERE g.decision_id = d.id AND NOT g.is_gold OFFSET 0) AS g",
            [ids],
        )
        (last,) = cursor.fetchone()
    return last.timestamp() - started


def purge_queues() -> None:
    """Drop every job waiting in the broker's queues (those the ingest-alone run left behind)."""
    from console.celery import app

    try:
        from console.core.queues import QUEUES
    except ImportError:  # a tree from before the per-kind queues
        QUEUES = ("celery",)
    with app.connection_for_write() as connection:
        for queue in QUEUES:
            connection.default_channel.queue_purge(queue)


def split_queues(one_worker: bool) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(gradable path, every other queue) as `make run` splits them; None for a single worker, asked
    for or because the tree predates the split (so older commits can be measured the same way)."""
    if one_worker:
        return None
    try:
        from console.core.queues import BACKGROUND_QUEUES, GRADABLE_PATH_QUEUES
    except ImportError:
        return None
    return GRADABLE_PATH_QUEUES, BACKGROUND_QUEUES


def long_work_worker(folder, workers: contextlib.ExitStack) -> None:
    """Start make run's third worker when the tree gives it embedder refits (trials and refits, at the
    lower priority): without it, a refit the stream sets off would never run."""
    try:
        from console.core.queues import REFIT_QUEUES, TRIAL_QUEUES
        from console.run import worker_environments
    except ImportError:  # a tree whose refits run on the background worker
        return
    workers.enter_context(
        celery_worker(
            folder,
            queues=(*TRIAL_QUEUES, *REFIT_QUEUES),
            name="ingest-worker-long",
            concurrency="2",
            extra_env=worker_environments()[2],
        )
    )


def _background_env() -> dict[str, str]:
    """The environment `make run` gives its background worker (a lower CPU priority), if the tree has it."""
    try:
        from console.run import worker_environments
    except ImportError:
        return {}
    return worker_environments()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, help=f"default {DECISIONS:,} ({QUICK_DECISIONS:,} with --quick)")
    parser.add_argument(
        "--one-worker",
        action="store_true",
        help="one worker on every queue (make run's shape before it split the gradable path off); "
        "default: make run's two workers, pool and verification on one (2 processes), the rest on another",
    )
    parser.add_argument(
        "--shared",
        action="store_true",
        help=f"{SHARED_CLIENTS} clients, a fifth of passages from {SHARED_CHUNKS} shared chunks",
    )
    parser.add_argument(
        "--stream", type=float, metavar="SECONDS", help="sustained load for this long instead (600: ten minutes)"
    )
    parser.add_argument("--rate", type=float, help="--stream: decisions/s (default: the HTTP rate, measured first)")
    parser.add_argument("--sample", type=float, help="--stream: seconds between backlog samples (default 10, 2 quick)")
    parser.add_argument("--idle-timeout", type=float, default=300.0, help="--stream: longest wait for idle, s")
    parser.add_argument("--web-workers", type=int, help="gunicorn workers (default 2, 1 with --quick)")
    parser.add_argument("--web-threads", type=int, default=2, help="gunicorn threads per worker (default 2)")
    add_workload_argument(parser)
    add_arguments(parser)
    args = parser.parse_args()
    global WORKLOAD
    WORKLOAD = args.workload
    args.decisions = args.decisions or (QUICK_DECISIONS if args.quick else DECISIONS)
    args.web_workers = args.web_workers or (1 if args.quick else 2)
    database_url = setup_django(data_dir(args))

    from audit.services import Actor
    from console.accounts import services as accounts
    from console.accounts.models import Route
    from console.accounts.services import route_create

    actor = Actor.system("bench")
    route = Route.objects.filter(slug="bench").first() or route_create(actor=actor, slug="bench", name="Benchmark")
    user = accounts.user_ensure(actor=actor, username="bench-integrator")
    accounts.role_grant(actor=actor, user=user, role="integrator")
    token = accounts.token_issue(actor=actor, user=user).key

    run = uuid.uuid4().hex[:8]
    if args.shared:
        shared_clients(token, run, args.decisions)
        return
    if args.stream:
        stream(args, route, token, run)
        return
    api_records = make_records(args.decisions, f"api-{run}")
    # Passages are compressed as a live console compresses them, with the dictionary its worker
    # builds from the first passages; on a fresh folder it is built here from a first COPY.
    if not passage_dictionary_ready():
        copy_all(database_url, route.pk, make_records(BATCH, f"copy-dictionary-{run}"))
        if not passage_dictionary_ready():
            raise RuntimeError("no passage dictionary could be built from the first passages")
    # COPY runs before and after the API and the faster run counts, so background work in the
    # database (checkpoints, autovacuum) cannot flatter the ratio.
    copy_seconds = copy_all(database_url, route.pk, make_records(args.decisions, f"copy-a-{run}"))
    # One worker in quick mode: one process fewer to start, and the requests still go through gunicorn.
    folder = data_dir(args)
    with web_server(workers=args.web_workers, threads=args.web_threads) as url:
        # Ingest alone, as the raw COPY runs: no worker takes CPU from gunicorn. The jobs it queues
        # are dropped afterwards (a benchmark route's decisions need no span checks).
        post_all(url, token, make_records(BATCH, f"warm-ingest-{run}"))
        ingest_seconds, failures = post_all(url, token, make_records(args.decisions, f"ingest-{run}"))
    purge_queues()
    if failures:
        raise RuntimeError(f"API refused batches: {failures[:2]}")
    with web_server(workers=args.web_workers, threads=args.web_threads) as url, contextlib.ExitStack() as workers:
        split = split_queues(args.one_worker)
        if split:  # make run's shape: the gradable path on a worker of its own
            background_env = _background_env()
            gradable, background = split
            workers.enter_context(celery_worker(folder, queues=gradable))
            workers.enter_context(
                celery_worker(
                    folder, queues=background, name="ingest-worker-rest", concurrency="1", extra_env=background_env
                )
            )
            long_work_worker(folder, workers)
        else:
            workers.enter_context(celery_worker(folder))
        warm = f"warm-{run}"
        post_all(url, token, make_records(BATCH, warm))  # warm connections, caches and the worker
        # Bounded in seconds with --quick: a stuck worker is reported, not waited on for half an hour.
        limit = QUICK_GRADABLE_TIMEOUT if args.quick else GRADABLE_TIMEOUT
        wait_gradable(route.pk, warm, BATCH, time.time(), timeout=limit)
        # Encoded before the clock starts, as post_all's own timer does: 20,000 realistic decisions
        # take about 0.4 s to encode, which "until gradable" counted and the HTTP rate did not.
        api_bodies = encode_batches(api_records)
        started = time.time()
        api_seconds, failures = post_bodies(url, token, api_bodies)
        if not failures:
            gradable_seconds = wait_gradable(route.pk, f"api-{run}", args.decisions, started, timeout=limit)
    if failures:
        raise RuntimeError(f"API refused batches: {failures[:2]}")
    copy_seconds = min(copy_seconds, copy_all(database_url, route.pk, make_records(args.decisions, f"copy-b-{run}")))
    ingest_rate = args.decisions / ingest_seconds
    api_rate = args.decisions / api_seconds
    copy_rate = args.decisions / copy_seconds
    ratio = ingest_rate / copy_rate
    gradable_rate = args.decisions / gradable_seconds
    keeps_up = gradable_rate / api_rate
    report(
        "ingest",
        [
            f"decisions: {args.decisions:,} with 5 passages each ({WORKLOAD} workload); API batches of {BATCH} "
            f"from {CLIENTS} clients, gunicorn {args.web_workers} x {args.web_threads}",
            f"API  POST /api/v1/decisions : {ingest_rate:9,.0f} decisions/s ({ingest_seconds:.2f} s, no worker)",
            f"raw COPY, same rows/tables  : {copy_rate:9,.0f} decisions/s ({copy_seconds:.2f} s)",
            f"ratio API/COPY              : {ratio:.2f}  (target >= 0.6) {'PASS' if ratio >= 0.6 else 'FAIL'}",
            f"API with the workers running: {api_rate:9,.0f} decisions/s ({api_seconds:.2f} s; the same 2 cores)",
            f"decisions/s until gradable  : {gradable_rate:9,.0f} decisions/s ({gradable_seconds:.2f} s; "
            f"span checks + pool item, worker concurrency {os.environ.get('CELERY_CONCURRENCY', '2')}"
            f"{', pool + verification on their own worker' if split else ', one worker on every queue'})",
            f"ratio gradable/HTTP         : {keeps_up:.2f}  (target >= 0.95) {'PASS' if keeps_up >= 0.95 else 'FAIL'}",
            f"load average                : {os.getloadavg()[0]:.2f}",
        ],
    )


def post_paced(
    url: str, token: str, bodies: list[bytes], rate_batches: float, failures: list[str], answered: list[int]
) -> threading.Thread:
    """Post `bodies` from CLIENTS threads, batch k no earlier than k / rate_batches seconds after the
    start (a batch that is late goes at once), counting answered batches in `answered[0]`; the
    thread that joins the clients is returned, started."""
    started = time.monotonic()
    lock = threading.Lock()
    position = iter(range(len(bodies)))

    def client() -> None:
        while True:
            with lock:
                k = next(position, None)
            if k is None:
                return
            delay = started + k / rate_batches - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            request = urllib.request.Request(
                url + "/api/v1/decisions",
                data=bodies[k],
                method="POST",
                headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    response.read()
            except (urllib.error.HTTPError, OSError) as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
            with lock:
                answered[0] += 1

    def all_clients() -> None:
        threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    runner = threading.Thread(target=all_clients)
    runner.start()
    return runner


def backlog(route_id: int, after_id: int, since: float) -> dict[str, int]:
    """What is still to do for the route's decisions after `after_id`: jobs in each queue (and those
    a worker has taken since `since`, a time.time(), and not finished: `taken`), and decisions
    without span checks, a pool item, or a vector from the route's current built-in embedder (when
    it has one). Taken jobs are counted from the broker's index of deliveries by time: a worker
    stopped in an earlier run leaves its unfinished deliveries there until they time out."""
    from django.db import connection

    from console.celery import app
    from console.core.queues import QUEUES
    from console.similarity.models import EmbedderVersion

    with app.connection_for_write() as broker:
        channel = broker.default_channel
        waiting = {queue: channel._size(queue) for queue in QUEUES}
        with channel.conn_or_acquire() as client:
            waiting["taken"] = client.zcount(channel.unacked_index_key, since, "+inf")
    current = EmbedderVersion.objects.filter(route_id=route_id, state="current").first()
    space = None if current is None else current.space_key
    # Counts of each table's rows past `after_id`, each read from an index, subtracted from the
    # decisions': the stream is the only writer of the benchmark's folder, so every decision past
    # `after_id` is the route's. A count of the decisions without each (three anti-joins) cost a
    # growing share of a core by the stream's end (2-3 s of PostgreSQL's CPU every sample at
    # 700,000 decisions), taken from the workers it measures.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM ledger_decision WHERE route_id = %s AND id > %s), "
            "(SELECT count(*) FROM verification_decisionsupport WHERE decision_id > %s), "
            "(SELECT count(*) FROM grading_gradingitem WHERE decision_id > %s AND NOT is_gold), "
            "(SELECT count(*) FROM similarity_questionvector WHERE decision_id > %s AND space = %s::text)",
            [route_id, after_id, after_id, after_id, after_id, space],
        )
        stored, checked, items, vectors = cursor.fetchone()
    no_checks, no_item, no_vector = stored - checked, stored - items, 0 if space is None else stored - vectors
    return {
        "stored": stored,
        "span checks": no_checks,
        "pool": no_item,
        "vectors": no_vector,
        **{f"queue {name}": size for name, size in waiting.items() if size},
    }


def _backlog_line(at: float, posted: int, state: dict[str, int]) -> str:
    queues = ", ".join(f"{name[6:]} {size}" for name, size in state.items() if name.startswith("queue "))
    return (
        f"{at:7.1f} s  posted {posted:7,}  stored {state['stored']:7,}  waiting: span checks {state['span checks']:6,}"
        f"  pool {state['pool']:6,}  vectors {state['vectors']:6,}  jobs: {queues or 'none'}"
    )


def _idle(state: dict[str, int]) -> bool:
    return not any(size for name, size in state.items() if name != "stored")


def stream(args, route, token: str, run: str) -> None:
    """--stream: make run's workers under a steady ingest rate; the backlog over time, then the time
    from the last batch until everything is idle."""
    from django.db import connection

    folder = data_dir(args)
    sample = args.sample or (2.0 if args.quick else 10.0)
    rate = args.rate
    with web_server(workers=args.web_workers, threads=args.web_threads) as url:
        if rate is None:  # the HTTP rate, as the ingest figure measures it: no worker running
            post_all(url, token, make_records(BATCH, f"warm-stream-{run}"))
            burst = 2 * BATCH if args.quick else 8 * BATCH
            seconds, failures = post_all(url, token, make_records(burst, f"rate-{run}"))
            if failures:
                raise RuntimeError(f"API refused batches: {failures[:2]}")
            rate = burst / seconds
    purge_queues()
    batches = max(1, round(args.stream * rate / BATCH))
    records = make_records(batches * BATCH, f"stream-{run}")
    bodies = [json.dumps({"decisions": records[i : i + BATCH]}).encode() for i in range(0, len(records), BATCH)]
    del records
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(max(id), 0) FROM ledger_decision WHERE route_id = %s", [route.pk])
        (after_id,) = cursor.fetchone()
    lines = [
        f"{batches:,} batches of {BATCH} at {rate:,.0f} decisions/s for {args.stream:.0f} s "
        f"({CLIENTS} clients; gunicorn {args.web_workers} x {args.web_threads}; make run's workers)",
    ]
    failures: list[str] = []
    with web_server(workers=args.web_workers, threads=args.web_threads) as url, contextlib.ExitStack() as workers:
        gradable, background = split_queues(False) or (None, None)
        workers.enter_context(celery_worker(folder, queues=gradable))
        workers.enter_context(
            celery_worker(
                folder, queues=background, name="ingest-worker-rest", concurrency="1", extra_env=_background_env()
            )
        )
        long_work_worker(folder, workers)
        started, since = time.monotonic(), time.time()
        answered = [0]
        poster = post_paced(url, token, bodies, rate / BATCH, failures, answered)
        samples = []
        while poster.is_alive():
            poster.join(timeout=sample)
            at = time.monotonic() - started
            state = backlog(route.pk, after_id, since)
            samples.append((at, state))
            lines.append(_backlog_line(at, answered[0] * BATCH, state))
        ended = time.monotonic() - started
        lines.append(f"last batch answered at {ended:.1f} s: {batches * BATCH / ended:,.0f} decisions/s achieved")
        idle_at = None
        while time.monotonic() - started - ended < args.idle_timeout:
            state = backlog(route.pk, after_id, since)
            if _idle(state):
                idle_at = time.monotonic() - started - ended
                break
            time.sleep(1.0)
        lines.append(_backlog_line(time.monotonic() - started, batches * BATCH, state))
    if failures:
        raise RuntimeError(f"API refused batches: {failures[:2]}")
    # Drain rates: decisions done per second over the stream, per kind of work, against the rate posted.
    if samples:
        at, last = samples[-1]
        stored = last["stored"]
        for kind in ("span checks", "pool", "vectors"):
            done = stored - last[kind]
            lines.append(
                f"{kind:<12}: {done / at:8,.0f} decisions/s done during the stream against {stored / at:8,.0f} "
                f"stored ({last[kind]:,} waiting at {at:.0f} s)"
            )
    # Growing: more waiting at the end of the stream than half-way through it, by over two batches.
    growing = [
        kind
        for kind in ("span checks", "pool", "vectors")
        if len(samples) >= 4 and samples[-1][1][kind] > 2 * BATCH + samples[len(samples) // 2][1][kind]
    ]
    idle = f"not within {args.idle_timeout:.0f} s" if idle_at is None else f"{idle_at:.1f} s"
    verdict = "PASS" if idle_at is not None and idle_at <= 30 else "FAIL"
    lines.append(f"idle after the last batch: {idle}  (target <= 30 s) {verdict}")
    lines.append(
        f"backlog growing through the stream: {'yes (' + ', '.join(growing) + ') FAIL' if growing else 'no PASS'}"
    )
    lines.append(f"load average: {os.getloadavg()[0]:.2f}")
    report("ingest --stream", lines)


def shared_clients(token: str, run: str, decisions: int) -> None:
    """SHARED_CLIENTS clients at once, passages overlapping across their batches; counts errors."""
    from console.ledger.models import Decision, Passage

    records = make_records(decisions, f"shared-{run}")
    share_passages(records, run)
    shared = sum(1 for rec in records for p in rec["passages"] if p["id"].startswith(f"kb/popular-{run}#"))
    before = Decision.objects.count(), Passage.objects.count()
    # Two workers of four threads: eight requests in the database at once, one per client.
    with web_server(workers=2, threads=SHARED_CLIENTS // 2) as url:
        seconds, failures = post_all(url, token, records, clients=SHARED_CLIENTS)
    stored = Decision.objects.count() - before[0]
    new_passages = Passage.objects.count() - before[1]
    expected_passages = len({(p["id"], p["text"]) for rec in records for p in rec["passages"]})
    lines = [
        f"decisions: {decisions:,} with 5 passages each; API batches of {BATCH} from {SHARED_CLIENTS} clients",
        f"passages from {SHARED_CHUNKS} shared chunks: {shared:,} of {decisions * 5:,} ({shared / decisions / 5:.0%})",
        f"rate                        : {decisions / seconds:9,.0f} decisions/s ({seconds:.2f} s)",
        f"decisions stored            : {stored:,} of {decisions:,}; passages stored {new_passages:,} "
        f"(distinct sent {expected_passages:,})",
        f"errors                      : {len(failures)}  (target 0) "
        f"{'PASS' if not failures and stored == decisions and new_passages == expected_passages else 'FAIL'}",
    ]
    lines += [f"  {failure}" for failure in failures[:3]]
    report("ingest --shared", lines)


if __name__ == "__main__":
    main()
