"""The built-in embedder's HNSW graph on the leading components of its vectors against a graph of the
whole vector: what a refusal's insert costs in each, and whether lookups find the same neighbours.

A route of N refused decisions with `storage.py`'s questions (random words: no topics to cluster
around, the hardest case for any approximate index), fitted and embedded by the console itself
(`builtin.embedder_fit`: the model, every question's vector, the graph, the promotion). The newest
R vectors are then taken out, the version's graph is built again on the rest in each form, and the
R go back in one statement a vector, as many graph inserts as an after-ingest job's COPY makes, in
rounds ordered prefix, whole, whole, prefix so that neither always meets the warmer cache. Printed:
milliseconds a vector of each (the median of its rounds), their ratio, each graph's size, and
recall@10 of the console's lookup (`selectors.nearest`: the graph's candidates re-ranked by the
whole vector for the prefix) at the inserted vectors against exact search of the whole vectors. The
baseline is the whole vector's graph in the same run; there is no target (bench/README.md).

Both graphs have the built-in graph's links (SIMILARITY_BUILTIN_HNSW_M) and lookups its candidates
(SIMILARITY_GRAPH_CANDIDATES); another pair of them is measured by setting those in the environment
(the figures before 8 links and 600 candidates: SIMILARITY_BUILTIN_HNSW_M=12
SIMILARITY_GRAPH_CANDIDATES=300; before 12 and 300: 24 and 100).

    .venv/bin/python bench/builtin_graph.py [--decisions 60000] [--inserts 2000] [--quick]

`--quick`: 3,000 decisions, 200 inserts, 10 queries a round.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from common import add_arguments, data_dir, month_partitions, report, setup_django
from hnsw_insert import inserted_ms, recall_at_10
from similarity import REFUSED_DECISIONS_COPY, refused_decision_row

BUILTIN_INSERT = (
    "INSERT INTO similarity_questionvector (decision_id, route_id, embedder_id, refused, occurred_at, vector, space) "
    "VALUES (%s, %s, %s, %s, %s, %s::halfvec, %s)"
)


def _loaded(slug: str, decisions: int) -> int:
    """The route's id, its N refused decisions loaded with COPY and embedded unless present."""
    from django.db import connection, transaction
    from storage import text_of

    from audit.services import Actor
    from console.accounts.models import Route
    from console.accounts.services import route_create
    from console.ledger.models import Decision
    from console.similarity.models import EmbedderState, EmbedderVersion
    from console.similarity.services import builtin

    route = Route.objects.filter(slug=slug).first() or route_create(
        actor=Actor.system("bench"), slug=slug, name=f"Built-in graph benchmark, {decisions:,} refusals"
    )
    stored = Decision.objects.filter(route=route).count()
    if stored and stored != decisions:
        raise SystemExit(f"route {slug} holds {stored} decisions, not {decisions}; remove the data folder")
    if not stored:
        at = datetime.now(UTC) - timedelta(days=1)
        with transaction.atomic(), connection.cursor() as cursor:
            month_partitions(cursor, [at])
            cursor.execute("SELECT nextval(pg_get_serial_sequence('ledger_decision', 'id'))")
            first = cursor.fetchone()[0]
            cursor.execute("SELECT setval(pg_get_serial_sequence('ledger_decision', 'id'), %s)", [first + decisions])
            with cursor.cursor.copy(REFUSED_DECISIONS_COPY) as copy:
                rng = random.Random(16)
                for offset in range(decisions):
                    question = text_of(rng, 80)[:-1] + "?"  # as storage.py's decisions ask
                    copy.write_row(refused_decision_row(first + offset, route.pk, at, question))
            cursor.execute("ANALYZE ledger_decision")
    if not EmbedderVersion.objects.filter(route=route, state=EmbedderState.CURRENT).exists():
        builtin.embedder_fit(actor=Actor.system("bench"), route_id=route.pk)
    return route.pk


def _taken_out(version, inserts: int) -> list[tuple]:
    """The newest `inserts` vectors of the version's space, deleted and returned to insert again."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM similarity_questionvector WHERE space = %s AND decision_id IN (SELECT decision_id "
            "FROM similarity_questionvector WHERE space = %s ORDER BY decision_id DESC LIMIT %s) "
            "RETURNING decision_id, route_id, embedder_id, refused, occurred_at, vector::text, space",
            [version.space_key, version.space_key, inserts],
        )
        return sorted(cursor.fetchall())


def _graph(version, components: int) -> tuple[float, int]:
    """Build the version's graph again holding `components` components, as the console does: seconds
    and bytes."""
    from django.db import connection

    from console.similarity.services.builtin import version_graph_create

    with connection.cursor() as cursor:
        cursor.execute("SELECT similarity_index_drop(%s)", [version.index_name])
    started = time.perf_counter()
    version_graph_create(version, components)
    seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size(%s::regclass)", [version.index_name])
        return seconds, cursor.fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--decisions", type=int, help="refused decisions in the graph (default 60,000)")
    parser.add_argument("--inserts", type=int, help="vectors inserted after each build (default 2,000)")
    args = parser.parse_args()
    decisions = args.decisions or (3_000 if args.quick else 60_000)
    inserts = args.inserts or (200 if args.quick else 2_000)
    queries = 10 if args.quick else 40
    setup_django(data_dir(args))
    from django.conf import settings
    from django.db import connection

    from console.similarity.models import EmbedderState, EmbedderVersion
    from console.similarity.services import builtin
    from console.similarity.services.partitions import build_list

    route_id = _loaded(f"bench-builtin-graph-{decisions}", decisions + inserts)
    version = EmbedderVersion.objects.get(route_id=route_id, state=EmbedderState.CURRENT)
    forms = {"prefix": builtin.graph_dimension(version.dimension), "whole": version.dimension}
    taken = _taken_out(version, inserts)
    timings: dict[str, list[float]] = {name: [] for name in forms}
    recall: dict[str, list[float]] = {name: [] for name in forms}
    lookup_ms: dict[str, list[float]] = {name: [] for name in forms}
    built: dict[str, tuple[float, int]] = {}
    for name in ("prefix", "whole", "whole", "prefix"):
        built[name] = _graph(version, forms[name])
        timings[name].append(inserted_ms(taken, BUILTIN_INSERT))
        found, ms = recall_at_10(route_id, taken, queries)
        recall[name].append(found)
        lookup_ms[name].append(ms)
        _taken_out(version, inserts)  # the next round inserts them again
    _graph(version, forms["prefix"])  # as the console builds it
    inserted_ms(taken, BUILTIN_INSERT)  # the route whole again for the next run
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('shared_buffers')")
        shared_buffers = cursor.fetchone()[0]
    ms = {name: statistics.median(values) for name, values in timings.items()}
    links, insert_list = builtin.graph_links()
    lines = [
        f"data: {decisions:,} refused decisions, storage.py's questions, built-in vectors of {version.dimension} "
        f"dims (m={links}, built with a list of {build_list(links)}, "
        f"inserts {insert_list}; lookups re-rank {settings.SIMILARITY_GRAPH_CANDIDATES} candidates; "
        f"shared_buffers={shared_buffers}), then {len(taken):,} inserted after each build, rounds prefix, whole, "
        "whole, prefix",
    ]
    for name in ("whole", "prefix"):
        seconds, size = built[name]
        lines.append(
            f"graph of {forms[name]:>3} components ({name:>6}): insert {ms[name]:6.2f} ms a vector "
            f"(rounds: {', '.join(f'{v:.2f}' for v in timings[name])}), built in {seconds:.0f} s, {size / 1e6:.0f} MB; "
            f"lookup p50 {statistics.median(lookup_ms[name]):.2f} ms"
        )
    lines += [
        f"ratio prefix/whole insert : {ms['prefix'] / ms['whole']:.2f}",
        f"recall@10 at inserted vectors against exact search of whole vectors: whole {min(recall['whole']):.3f}, "
        f"prefix re-ranked {min(recall['prefix']):.3f} (the lower round) over {queries} queries each",
    ]
    report("builtin graph", lines)


if __name__ == "__main__":
    main()
