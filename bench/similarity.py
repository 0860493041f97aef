"""Similar refusals over pgvector HNSW, gap clustering, and the built-in embedder.

Four figures, each against its target (bench/README.md):

1. Similar-refusal lookups: the k=10 nearest refusals of one route among N refused decisions
   with 384-dimension question vectors (1,000,000 by default), through the same SQL the API runs
   (`console.similarity.selectors.nearest`, HNSW, ef_search as configured): p50/p95 over the
   query set; target p95 < 50 ms. The baseline, in the same run, is exact search on the same rows
   (the same query with index scans disabled, a parallel sequential scan): recall@10 of HNSW
   against it (target >= 0.95) and the ratio of HNSW to exact time. The plan of the HNSW query is
   printed so the index is seen to be used. The 200-deep walk the 30-day "similar form" count
   takes when the list's own walk ends in similar form is timed beside it. The API itself
   (`GET /api/v1/decisions/{id}/similar`, gunicorn on loopback) is timed twice: as configured
   (on these vectors the list's walk answers the count) and with SIMILARITY_SAME_FORM_MIN=0, so
   that every request also takes the deep walk (a route full of near-duplicates).
2. Clustering 100,000 refusal vectors (HDBSCAN on a 5,000 sample, the rest to the nearest centre,
   as the gaps job does): seconds, target < 60 s, and the adjusted Rand index against the planted
   groups.
3. Built-in embedding of 100,000 questions (TF-IDF words + character n-grams, SVD to 256):
   seconds, target < 60 s; the fit on its 10,000-question sample is printed beside it.

Vectors are drawn around 2,000 random centres (real question embeddings are clustered, not
uniform; uniform noise in 384 dimensions is the worst case for any approximate index and a case
no query log looks like). Data is loaded with COPY once per size and reused.

    .venv/bin/python bench/similarity.py [--decisions 1000000] [--queries 200] [--exact 20] [--quick]

`--quick`: 5,000 decisions, 30 queries, 10 exact, 5,000 to cluster and embed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
import urllib.request
from datetime import UTC, datetime, timedelta

import numpy as np
from common import add_arguments, bench_reviewer, data_dir, month_partitions, report, setup_django, web_server

DIM = 384
CENTRES = 2_000
SEED = 20261130


def _vectors(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    which = rng.integers(0, len(centres), count)
    return (centres[which] + rng.normal(scale=0.6, size=(count, DIM))).astype(np.float32)


REFUSED_DECISIONS_COPY = (
    "COPY ledger_decision (id, route_id, request_id, occurred_at, question, claim, gate_name, gate_score, "
    "cutoff, outcome, distinct_served_answer, versions, segments, ingested_at, content_hash) FROM STDIN"
)


def refused_decision_row(pk: int, route_id: int, moment: datetime, question: str) -> tuple:
    """A refused decision's row for REFUSED_DECISIONS_COPY."""
    return (
        pk,
        route_id,
        f"sim-{pk}",
        moment,
        question,
        "claim",
        "entailment",
        0.3,
        0.7,
        "refused",
        None,
        '{"corpus": "bench"}',
        "{}",
        moment,
        pk.to_bytes(32, "big"),  # content_hash: a digest is 32 bytes
    )


def ensure_loaded(slug: str, decisions: int) -> tuple[int, float]:
    """The route's id, loading N refused decisions and their vectors with COPY unless present."""
    from django.db import connection, transaction

    from audit.services import Actor
    from console.accounts.models import Route
    from console.accounts.services import route_create
    from console.ledger.models import Decision
    from console.similarity.models import QuestionVector, RouteEmbedding, Source
    from console.similarity.services.vectors import copy_vectors

    route = Route.objects.filter(slug=slug).first() or route_create(
        actor=Actor.system("bench"), slug=slug, name=f"Similarity benchmark, {decisions:,} refusals"
    )
    stored = QuestionVector.objects.filter(route=route).count()
    if stored == decisions:
        return route.pk, 0.0
    if stored or Decision.objects.filter(route=route).exists():
        raise SystemExit(f"route {slug} holds {stored} vectors, not {decisions}; remove the data folder and run again")
    started = time.perf_counter()
    rng = np.random.default_rng(SEED)
    centres = rng.normal(size=(CENTRES, DIM))
    at = datetime.now(UTC) - timedelta(days=60)
    chunk = 50_000
    with transaction.atomic(), connection.cursor() as cursor:
        space = RouteEmbedding.objects.create(route=route, source=Source.SENT, dimension=DIM)
        cursor.execute("SELECT similarity_space_create(%s)", [space.space_key])  # the space's partition
        month_partitions(cursor, [at + timedelta(days=day) for day in range(61)])
        cursor.execute("SELECT nextval(pg_get_serial_sequence('ledger_decision', 'id'))")
        first_id = cursor.fetchone()[0]
        cursor.execute("SELECT setval(pg_get_serial_sequence('ledger_decision', 'id'), %s)", [first_id + decisions])
        for start in range(0, decisions, chunk):
            size = min(chunk, decisions - start)
            ids = range(first_id + start, first_id + start + size)
            when = [at + timedelta(seconds=int(s)) for s in rng.integers(0, 60 * 86400, size)]
            with cursor.cursor.copy(REFUSED_DECISIONS_COPY) as copy:
                for pk, moment in zip(ids, when, strict=True):
                    copy.write_row(refused_decision_row(pk, route.pk, moment, f"question {pk}"))
            vectors = _vectors(rng, centres, size)
            copy_vectors(
                cursor,
                (
                    (pk, route.pk, None, True, moment, vector, space.space_key)
                    for pk, moment, vector in zip(ids, when, vectors, strict=True)
                ),
            )
        cursor.execute("ANALYZE similarity_questionvector")
    return route.pk, time.perf_counter() - started


def ensure_index(route_id: int) -> float:
    """Build the route's index unless one with the configured m and insert list is there
    (SIMILARITY_HNSW_M, SIMILARITY_HNSW_EF_INSERT: another pair rebuilds it). After a build the
    index's options hold the insert's list, not the build's (similarity migration 0013), so a change
    of SIMILARITY_HNSW_EF_CONSTRUCTION alone is not seen here: remove the data folder then."""
    from django.conf import settings
    from django.db import connection

    from console.similarity.models import RouteEmbedding
    from console.similarity.services.partitions import space_index_create

    space = RouteEmbedding.objects.get(route_id=route_id)
    wanted = {f"m={settings.SIMILARITY_HNSW_M}", f"ef_construction={settings.SIMILARITY_HNSW_EF_INSERT}"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [space.index_name])
        row = cursor.fetchone()
        if row and set(row[0] or ()) >= wanted:
            return 0.0
        if row:
            cursor.execute("SELECT similarity_index_drop(%s)", [space.index_name])
    started = time.perf_counter()
    space_index_create(route_id=route_id)
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def lookups(route_id: int, queries: int, exact: int) -> list[str]:
    from django.conf import settings
    from django.db import connection, transaction

    from console.accounts.models import Route
    from console.similarity import selectors
    from console.similarity.models import QuestionVector

    space = selectors.active_space(Route.objects.get(pk=route_id))
    rng = np.random.default_rng(SEED + 1)
    ids = list(QuestionVector.objects.filter(route_id=route_id).values_list("decision_id", flat=True))
    chosen = [int(i) for i in rng.choice(ids, size=queries, replace=False)]
    vectors = dict(QuestionVector.objects.filter(decision_id__in=chosen).values_list("decision_id", "vector"))
    literal = selectors._literal(vectors[chosen[0]])  # the form the lookups send
    sql, params, _ = selectors._nearest_sql(space, "refused", literal=literal, exclude=chosen[0], k=10)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = " / ".join(re.sub(r"'\[[^']*\]'", "'[...]'", row[0].strip()) for row in cursor.fetchall()[:3])
    # A server in use holds the graph's upper layers and much of the index in its cache; a freshly
    # started one holds nothing. Other questions than the timed ones warm it first.
    chosen_set = set(chosen)
    warm = [int(i) for i in rng.choice(ids, size=queries, replace=False) if int(i) not in chosen_set]
    for pk, vector in QuestionVector.objects.filter(decision_id__in=warm).values_list("decision_id", "vector"):
        selectors.nearest(space, vector, exclude=pk)
    hnsw_ms, hnsw = [], {}
    for pk in chosen:
        started = time.perf_counter()
        hnsw[pk] = [d for d, _ in selectors.nearest(space, vectors[pk], exclude=pk, k=10)]
        hnsw_ms.append((time.perf_counter() - started) * 1000)
    depth = settings.SIMILARITY_SAME_FORM_DEPTH
    deep_ms = []
    for pk in chosen[:exact]:
        started = time.perf_counter()
        selectors.nearest(space, vectors[pk], exclude=pk, k=depth, ef_search=depth)
        deep_ms.append((time.perf_counter() - started) * 1000)
    exact_ms, recalls = [], []
    for pk in chosen[:exact]:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_indexscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
            started = time.perf_counter()
            truth = [d for d, _ in selectors.nearest(space, vectors[pk], exclude=pk, k=10)]
            exact_ms.append((time.perf_counter() - started) * 1000)
        recalls.append(len(set(truth) & set(hnsw[pk])) / len(truth))
    p95 = percentile(hnsw_ms, 95)
    recall = statistics.fmean(recalls)
    ratio = statistics.median(hnsw_ms) / statistics.median(exact_ms)
    uses_index = space.index_name in plan
    return [
        f"plan: {plan}",
        f"HNSW index in the plan: {'yes' if uses_index else 'NO'}",
        f"HNSW k=10 lookups   : p50 {percentile(hnsw_ms, 50):7.2f} ms  p95 {p95:7.2f} ms over {queries} queries  "
        f"target p95 < 50 ms {'PASS' if p95 < 50 else 'FAIL'} (after {len(warm)} other lookups warmed the cache)",
        f"HNSW k={depth} walk  : p50 {percentile(deep_ms, 50):7.2f} ms  p95 {percentile(deep_ms, 95):7.2f} ms over "
        f"{exact} queries (ef_search {depth}: the 30-day count's second walk, when the first ends in similar form)",
        f"exact k=10 (seqscan): p50 {statistics.median(exact_ms):7.2f} ms over {exact} queries",
        f"ratio HNSW/exact    : {ratio:.4f} (p50 to p50)",
        f"recall@10 vs exact  : {recall:.3f} over {exact} queries  "
        f"target >= 0.95 {'PASS' if recall >= 0.95 else 'FAIL'}",
    ], chosen


def api_lookups(chosen: list[int], *, same_form_min: str | None = None) -> str:
    """p50/p95 of GET .../similar?k=10 through gunicorn. `same_form_min` overrides the server's
    SIMILARITY_SAME_FORM_MIN: "0" puts every neighbour in similar form, so every request also takes
    the 30-day count's second walk (200 deep), the worst case of a route full of near-duplicates."""
    from audit.services import Actor
    from console.accounts import services as accounts

    token = accounts.token_issue(actor=Actor.system("bench"), user=bench_reviewer()).key
    timings, deep = [], 0
    saved = os.environ.get("SIMILARITY_SAME_FORM_MIN")
    if same_form_min is not None:
        os.environ["SIMILARITY_SAME_FORM_MIN"] = same_form_min
    try:
        with web_server(workers=1, threads=1) as url:
            for i, pk in enumerate(chosen):
                request = urllib.request.Request(
                    f"{url}/api/v1/decisions/{pk}/similar?k=10", headers={"Authorization": f"Token {token}"}
                )
                started = time.perf_counter()
                with urllib.request.urlopen(request, timeout=60) as response:
                    body = json.loads(response.read())
                if i:  # the first request warms the worker's imports
                    timings.append((time.perf_counter() - started) * 1000)
                assert len(body["results"]) == 10, body
                # the list's walk answers the count unless its last neighbour is still in similar form
                deep += body["results"][-1]["similarity"] >= body["similar_form_30d"]["threshold"]
    finally:
        if same_form_min is not None:
            os.environ.pop("SIMILARITY_SAME_FORM_MIN")
            if saved is not None:
                os.environ["SIMILARITY_SAME_FORM_MIN"] = saved
    return (
        f"API GET .../similar : p50 {percentile(timings, 50):7.2f} ms  p95 {percentile(timings, 95):7.2f} ms "
        f"over {len(timings)} requests, {deep} of {len(chosen)} with the count's second walk "
        f"(similar form >= {same_form_min or 'default'}; gunicorn 1 x 1)  target p95 < 50 ms "
        f"{'PASS' if percentile(timings, 95) < 50 else 'FAIL'}"
    )


def clustering(count: int) -> str:
    from sklearn.metrics import adjusted_rand_score

    from console.similarity import topics

    rng = np.random.default_rng(SEED + 2)
    groups = 40
    centres = rng.normal(size=(groups, DIM))
    truth = rng.integers(0, groups, count)
    vectors = (centres[truth] + rng.normal(scale=0.6, size=(count, DIM))).astype(np.float32)
    started = time.perf_counter()
    found = topics.cluster(vectors, seed=0)
    seconds = time.perf_counter() - started
    ari = adjusted_rand_score(truth, found.labels)
    return (
        f"clustering {count:,} refusals: {seconds:6.1f} s ({len(found.centres)} clusters from a "
        f"{found.sampled:,} sample, ARI vs plant {ari:.3f})  target < 60 s {'PASS' if seconds < 60 else 'FAIL'}"
    )


def embedding(count: int) -> str:
    from console.review.demo import _PHRASINGS, _TOPICS
    from console.similarity import embedder

    rng = np.random.default_rng(SEED + 3)
    words = [t[0] for topics in _TOPICS.values() for t in topics]
    extra = ["laptop", "today", "urgent", "badge", "printer", "office", "manager", "contract", "weekend", "account"]
    questions = [
        _PHRASINGS[i % len(_PHRASINGS)].format(t=words[rng.integers(len(words))])
        + " "
        + " ".join(rng.choice(extra, size=3))
        + f" ref {rng.integers(10_000)}"
        for i in range(count)
    ]
    started = time.perf_counter()
    model = embedder.fit(list(rng.choice(questions, size=min(count, 10_000), replace=False)))
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    embedder.transform(model, questions)
    seconds = time.perf_counter() - started
    return (
        f"built-in embedding of {count:,} questions: {seconds:6.1f} s (fit on {min(count, 10_000):,}: "
        f"{fit_seconds:.1f} s)  target < 60 s {'PASS' if seconds < 60 else 'FAIL'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--decisions", type=int, help="refused decisions with vectors (default 1,000,000)")
    parser.add_argument("--queries", type=int, help="HNSW lookups timed (default 200)")
    parser.add_argument("--exact", type=int, help="of those, also run exactly, for recall and the ratio (default 20)")
    parser.add_argument("--cluster", type=int, help="refusals clustered (default 100,000)")
    parser.add_argument("--embed", type=int, help="questions embedded (default 100,000)")
    args = parser.parse_args()
    quick = args.quick
    decisions = args.decisions or (5_000 if quick else 1_000_000)
    queries = args.queries or (30 if quick else 200)
    exact = min(queries, args.exact or (10 if quick else 20))
    folder = data_dir(args)
    setup_django(folder)
    from django.conf import settings

    slug = f"bench-similarity-{decisions}"
    route_id, load_seconds = ensure_loaded(slug, decisions)
    index_seconds = ensure_index(route_id)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_buffers")  # whether the index fits in PostgreSQL's own cache
        shared_buffers = cursor.fetchone()[0]
    lines = [
        f"data: {decisions:,} refused decisions x {DIM} dims, route {slug} "
        f"(loaded with COPY in {load_seconds:.0f} s; HNSW m={settings.SIMILARITY_HNSW_M} "
        f"ef_construction={settings.SIMILARITY_HNSW_EF_CONSTRUCTION} built in {index_seconds:.0f} s; "
        f"0 = reused; ef_search={settings.SIMILARITY_EF_SEARCH}; shared_buffers={shared_buffers})"
    ]
    found, chosen = lookups(route_id, queries, exact)
    lines += found
    sample = chosen[: min(len(chosen), 50)]
    lines.append(api_lookups(sample))
    lines.append(api_lookups(sample, same_form_min="0"))
    lines.append(clustering(args.cluster or (5_000 if quick else 100_000)))
    lines.append(embedding(args.embed or (5_000 if quick else 100_000)))
    report("similarity", lines)


if __name__ == "__main__":
    main()
