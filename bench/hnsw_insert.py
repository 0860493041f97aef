"""What a vector's insert into a built HNSW graph costs, with the build's candidate list and with
the shorter one later inserts take (SIMILARITY_HNSW_EF_INSERT), and whether queries find the vectors
so inserted.

A route of N refused decisions with 384-dimension vectors (similarity.py's data, clustered around
2,000 centres; 60,000 by default, whose graph outgrows 32 MB of shared buffers as a busy route's
does), its graph built as the console builds one (`space_index_create`: m and the build's list,
then the insert's list set on the index). The newest R decisions' vectors are left out of the build
and then inserted one statement a vector, as many index inserts as an after-ingest job's COPY
makes, in rounds that alternate the index's list between the build's and the insert's (set through
the same function the console uses), so both meet the same graph and the same cache. Printed: the
milliseconds a vector of each list (the median of its rounds), their ratio, and recall@10 against
exact search of queries at the vectors each list inserted. The baseline is the build's list in the
same run; there is no target (bench/README.md).

    .venv/bin/python bench/hnsw_insert.py [--decisions 60000] [--inserts 2000] [--rounds 4] [--quick]

`--quick`: 3,000 decisions, 200 inserts in 2 rounds, 10 queries.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from common import add_arguments, data_dir, report, setup_django
from similarity import DIM, ensure_loaded


def _rebuilt(route_id: int, inserts: int) -> tuple[list[tuple], float, str]:
    """Drop the route's index, take its newest `inserts` vectors out (kept to insert again) and build
    the index on the rest as the console does; the rows taken out, the build's seconds and the index's name."""
    from django.db import connection

    from console.similarity.models import RouteEmbedding
    from console.similarity.services.partitions import space_index_create

    space = RouteEmbedding.objects.get(route_id=route_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT similarity_index_drop(%s)", [space.index_name])
        cursor.execute(
            "DELETE FROM similarity_questionvector WHERE space = %s AND decision_id IN (SELECT decision_id "
            "FROM similarity_questionvector WHERE space = %s ORDER BY decision_id DESC LIMIT %s) "
            "RETURNING decision_id, route_id, refused, occurred_at, vector::text, space",
            [space.space_key, space.space_key, inserts],
        )
        taken = sorted(cursor.fetchall())
    started = time.perf_counter()
    space_index_create(route_id=route_id)
    return taken, time.perf_counter() - started, space.index_name


SENT_INSERT = (
    "INSERT INTO similarity_questionvector (decision_id, route_id, refused, occurred_at, vector, space) "
    "VALUES (%s, %s, %s, %s, %s::halfvec, %s)"
)


def inserted_ms(rows: list[tuple], sql: str = SENT_INSERT) -> float:
    """Milliseconds a vector to insert `rows` with `sql`, a statement each, in one transaction: as
    many graph inserts as an after-ingest job makes."""
    from django.db import connection, transaction

    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for row in rows:
            cursor.execute(sql, row)
    return (time.perf_counter() - started) * 1000 / len(rows)


def recall_at_10(route_id: int, rows: list[tuple], queries: int) -> tuple[float, float]:
    """recall@10 of the console's lookup against exact search of the whole vectors (the same walk with
    index scans off, and no graph on leading components), for queries at `queries` of `rows`'
    vectors; and the lookups' median milliseconds."""
    from django.db import connection, transaction

    from console.accounts.models import Route
    from console.similarity import selectors

    space = selectors.active_space(Route.objects.get(pk=route_id))
    exact = dataclasses.replace(space, graph_dimension=None)
    step = max(1, len(rows) // queries)
    hits = total = 0
    times = []
    for decision_id, *_, vector, _space in rows[::step][:queries]:
        started = time.perf_counter()
        found = {pk for pk, _ in selectors.nearest(space, vector, exclude=decision_id, k=10)}
        times.append((time.perf_counter() - started) * 1000)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_indexscan = off")
            truth = {pk for pk, _ in selectors.nearest(exact, vector, exclude=decision_id, k=10)}
        hits += len(found & truth)
        total += len(truth)
    return hits / total, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--decisions", type=int, help="refused decisions in the graph (default 60,000)")
    parser.add_argument("--inserts", type=int, help="vectors inserted after the build (default 2,000)")
    parser.add_argument("--rounds", type=int, help="rounds of each list (default 4)")
    args = parser.parse_args()
    quick = args.quick
    decisions = args.decisions or (3_000 if quick else 60_000)
    inserts = args.inserts or (200 if quick else 2_000)
    rounds = args.rounds or (2 if quick else 4)
    queries = 10 if quick else 40
    setup_django(data_dir(args))
    from django.conf import settings
    from django.db import connection

    route_id, _ = ensure_loaded(f"bench-hnsw-insert-{decisions}", decisions + inserts)
    taken, build_seconds, index_name = _rebuilt(route_id, inserts)
    lists = {"build": settings.SIMILARITY_HNSW_EF_CONSTRUCTION, "insert": settings.SIMILARITY_HNSW_EF_INSERT}
    # Every row taken out goes back (a run that left some out would find the route short next time).
    bounds = [len(taken) * number // (2 * rounds) for number in range(2 * rounds + 1)]
    timings: dict[str, list[float]] = {name: [] for name in lists}
    inserted: dict[str, list[tuple]] = {name: [] for name in lists}
    for number in range(2 * rounds):
        # build, insert, insert, build, ...: neither list always goes first on a warmer cache
        name = ("build", "insert")[(number + number // 2) % 2]
        rows = taken[bounds[number] : bounds[number + 1]]
        with connection.cursor() as cursor:
            cursor.execute("SELECT similarity_index_insert_effort(%s, %s)", [index_name, lists[name]])
        timings[name].append(inserted_ms(rows))
        inserted[name] += rows
    with connection.cursor() as cursor:
        cursor.execute("SELECT similarity_index_insert_effort(%s, %s)", [index_name, lists["insert"]])
        cursor.execute("SELECT pg_relation_size(%s::regclass), current_setting('shared_buffers')", [index_name])
        index_bytes, shared_buffers = cursor.fetchone()
    ms = {name: statistics.median(values) for name, values in timings.items()}
    recall = {name: recall_at_10(route_id, rows, queries)[0] for name, rows in inserted.items()}
    report(
        "hnsw insert",
        [
            f"data: {decisions:,} refused decisions x {DIM} dims in the graph (m={settings.SIMILARITY_HNSW_M}, "
            f"built with a list of {lists['build']} in {build_seconds:.0f} s, {index_bytes / 1e6:.0f} MB; "
            f"shared_buffers={shared_buffers}), then {len(taken):,} inserted in {2 * rounds} rounds "
            f"of about {len(taken) // (2 * rounds):,}",
            f"insert, build's list ({lists['build']:>3})  : {ms['build']:6.2f} ms a vector "
            f"(rounds: {', '.join(f'{v:.2f}' for v in timings['build'])})",
            f"insert, insert's list ({lists['insert']:>3}) : {ms['insert']:6.2f} ms a vector "
            f"(rounds: {', '.join(f'{v:.2f}' for v in timings['insert'])})",
            f"ratio insert's/build's list : {ms['insert'] / ms['build']:.2f}",
            f"recall@10 at inserted vectors: build's list {recall['build']:.3f}, insert's list "
            f"{recall['insert']:.3f} over {queries} queries each",
        ],
    )


if __name__ == "__main__":
    main()
