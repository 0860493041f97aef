"""Storage: bytes on disk per decision, per table (heap, indexes, TOAST), against the decision's raw JSON.

A realistic workload goes in through the real ingest service: `POST /api/v1/decisions` to gunicorn,
batches of 500, with a Celery worker doing the after-ingest work (span checks, pool entry, shadow
opening) until every decision is gradable, as under `make run`. Each decision has a question of
about 80 characters, an answer of about 200 (the claim the gate scored, and the served answer when
served), and 5 passages of about 500 characters, a fifth of them drawn from a pool of popular
chunks that many decisions retrieve. The data goes into a database of its own (`bench_storage`,
created afresh in the data folder's PostgreSQL on every run), so every byte counted belongs to
this workload: after VACUUM ANALYZE, each table of the schema is measured with
`pg_relation_size` (heap), `pg_indexes_size` and its TOAST table (a partitioned table as the sum
of its month partitions), and the total is divided by the
decisions and compared with the mean size of a decision as sent (its JSON record, UTF-8).
Target: at most 1.5x the raw JSON.

    .venv/bin/python bench/storage.py [--decisions 20000] [--quick] [--data-dir DIR]

`--quick` stores 1,000 decisions: seconds, same code paths, figures that mean little (fixed
costs, such as a table's first pages, weigh on few rows).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import uuid

from common import add_arguments, data_dir, report, setup_django, web_server
from ingest import GRADABLE_TIMEOUT, QUICK_GRADABLE_TIMEOUT, celery_worker, post_all, wait_gradable

DECISIONS, QUICK_DECISIONS = 20_000, 1_000
DATABASE = "bench_storage"
SHARED_SHARE = 0.2
TARGET = 1.5

# Words of an IT-support knowledge base; drawn at random they compress about as well as prose.
WORDS = (
    "account access admin after agent alert allow app approval archive audit backup badge battery before "
    "browser cache calendar camera certificate change channel check client cloud code computer config "
    "connect contract copy credential data delete desk device disk display dock domain download driver "
    "email enable encrypt error expense file firewall folder form group guest hardware help home install "
    "invoice key keyboard laptop leave license link list local lock login mail manager meeting message "
    "mobile monitor network new office open order password payroll phone policy portal printer profile "
    "proxy queue reboot recover remote request reset restore room router schedule screen secure security "
    "server service session settings share signature software storage support sync system team ticket "
    "token travel update upgrade upload user vendor video virtual vpn wallet webcam wifi window wireless "
    "the a to of and in for on with your is be can if then when from by this that it or not you will"
).split()


def text_of(rng: random.Random, length: int) -> str:
    """Words until about `length` characters, as a sentence."""
    words: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[: length - 1].capitalize() + "."


def workload(count: int, run: str, *, seed: int = 16, first: int = 0, total: int | None = None) -> list[dict]:
    """`count` decision records of route bench-storage; a fifth of the passages come from a pool of
    popular chunks (about one for every 40 decisions), the rest are unique.

    A large run can be made in slices (bench/memory.py posts 100,000 without holding them all):
    records `first` to `first + count` of a run of `total`, sharing the same popular pool."""
    rng = random.Random(seed)
    pool = [
        {
            "id": f"kb/popular/{n}",
            "text": text_of(rng, 500),
            "source": "knowledge-base",
            "uri": f"https://intranet.example/kb/popular/{n}",
        }
        for n in range(max(20, (total or count) // 40))
    ]
    if first:
        rng = random.Random(f"{seed}-{first}")
    records = []
    for n in range(first, first + count):
        score = round(rng.betavariate(9, 1.3) if rng.random() < 0.8 else rng.betavariate(2, 4), 4)
        answer = text_of(rng, 200)
        passages = []
        for rank, chunk in enumerate(rng.sample(pool, 5), start=1):
            if rng.random() >= SHARED_SHARE:
                chunk = {
                    "id": f"kb/{run}/{n}/{rank}",
                    "text": text_of(rng, 500),
                    "source": "knowledge-base",
                    "uri": f"https://intranet.example/kb/{run}/{n}/{rank}",
                }
            passages.append(chunk | {"rank": rank, "retrieval_score": round(0.95 - 0.08 * rank, 3)})
        served = score >= 0.7
        records.append(
            {
                "route": "bench-storage",
                "request_id": f"{run}-{n:07d}",
                "occurred_at": f"2026-11-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00Z",
                "question": text_of(rng, 80)[:-1] + "?",
                "gate": {"name": "entailment", "score": score, "cutoff": 0.7},
                "outcome": "served" if served else "refused",
                "claim": answer,
                **({"served_answer": answer} if served else {}),
                "passages": passages,
                "versions": {
                    "model": "gen-2026-11",
                    "retriever": "hybrid-3",
                    "corpus": "snap-2026-11-01",
                    "gate": "nli-4",
                },
                "segments": {"query_type": "how-to", "language": "en"},
            }
        )
    return records


def fresh_database(owner_url: str) -> str:
    """Drop and create the benchmark's own database; its URL as the owner role."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from psycopg import sql

    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DATABASE)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    return urlunsplit(urlsplit(owner_url)._replace(path="/" + DATABASE))


def table_sizes() -> list[tuple[str, int, int, int, int, int]]:
    """(table, rows, heap, indexes, toast, total) of every table of the schema that holds bytes."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text, sum(c.reltuples)::bigint,
                   sum(pg_relation_size(c.oid))::bigint, sum(pg_indexes_size(c.oid))::bigint,
                   sum(coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0))::bigint,
                   sum(pg_total_relation_size(c.oid))::bigint
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind = 'r'
             GROUP BY 1
             ORDER BY 6 DESC
            """
        )
        return [row for row in cursor.fetchall() if row[1] > 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, help=f"default {DECISIONS:,} ({QUICK_DECISIONS:,} with --quick)")
    add_arguments(parser)
    args = parser.parse_args()
    count = args.decisions or (QUICK_DECISIONS if args.quick else DECISIONS)
    folder = data_dir(args)
    from console import embedded

    base_url = os.environ.get("BENCH_DATABASE_URL") or embedded.postgres_owner_url(folder)
    os.environ["BENCH_DATABASE_URL"] = fresh_database(base_url)
    database_url = setup_django(folder)

    from audit.services import Actor
    from console.accounts import services as accounts
    from console.accounts.services import route_create

    actor = Actor.system("bench")
    route = route_create(actor=actor, slug="bench-storage", name="Storage benchmark")
    user = accounts.user_ensure(actor=actor, username="bench-integrator")
    accounts.role_grant(actor=actor, user=user, role="integrator")
    token = accounts.token_issue(actor=actor, user=user).key
    run = uuid.uuid4().hex[:8]
    records = workload(count, run)
    raw = sum(len(json.dumps(record, ensure_ascii=False).encode()) for record in records)
    shared = sum(1 for record in records for p in record["passages"] if p["id"].startswith("kb/popular/"))

    started = time.time()
    with web_server(workers=1 if args.quick else 2, threads=2) as url, celery_worker(folder, name="storage-worker"):
        seconds, failures = post_all(url, token, records)
        if failures:
            raise RuntimeError(f"API refused batches: {failures[:2]}")
        wait_gradable(route.pk, run, count, started, timeout=QUICK_GRADABLE_TIMEOUT if args.quick else GRADABLE_TIMEOUT)

    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    sizes = table_sizes()
    total = sum(row[5] for row in sizes)
    lines = [
        f"decisions: {count:,} through POST /api/v1/decisions ({count / seconds:,.0f}/s) and the after-ingest "
        f"worker; passages from the popular pool: {shared:,} of {count * 5:,} ({shared / count / 5:.0%})",
        f"raw JSON per decision (as sent)   : {raw / count:8,.0f} bytes",
        f"{'table':<34}{'rows':>10}{'heap':>9}{'indexes':>9}{'toast':>8}{'total':>9}  (bytes per decision)",
    ]
    for name, rows, heap, indexes, toast, table_total in sizes:
        if table_total / count < 1:
            continue
        lines.append(
            f"{name:<34}{rows:>10,}{heap / count:>9,.0f}{indexes / count:>9,.0f}{toast / count:>8,.0f}"
            f"{table_total / count:>9,.0f}"
        )
    heap = sum(row[2] for row in sizes)
    indexes = sum(row[3] for row in sizes)
    toast = sum(row[4] for row in sizes)
    ratio = total / raw
    similarity = sum(row[5] for row in sizes if row[0].startswith("similarity_"))
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    lines += [
        f"{'all tables':<34}{'':>10}{heap / count:>9,.0f}{indexes / count:>9,.0f}{toast / count:>8,.0f}"
        f"{total / count:>9,.0f}",
        f"bytes on disk per decision        : {total / count:8,.0f} bytes",
        # The question vectors and embedder fits grow with each refit (rows of retired versions
        # are deleted, their space reused later), so they depend on when refits ran in the run.
        f"  without similarity_* tables     : {(total - similarity) / count:8,.0f} bytes, "
        f"ratio {(total - similarity) / raw:.2f}",
        f"ratio to raw JSON                 : {ratio:.2f}  (target <= {TARGET}) {verdict}",
    ]
    report("storage", lines)


if __name__ == "__main__":
    main()
