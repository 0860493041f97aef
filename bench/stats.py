"""Operating points + calibration over 1,000,000 decisions with 20,000 graded.

The API side is two HTTP requests to a real gunicorn server over loopback
(`GET /api/v1/routes/bench-stats/operating-points` and `.../calibration`), each timed from the
request until its whole body is received (request, SQL, statistics, writing the JSON, response).
The client's own parsing of the bodies is reported on a line of its own, outside those figures: a
Python client's `json.loads` of the 450 KB calibration body took from 6 to over 15 ms depending on
the state of its own heap, which is the client's cost, not the console's (bench/README.md,
2026-12-03). The baseline is numpy on the same arrays already in
memory, in the same run: the population's 1,000,000 gate scores and the 20,000 graded scores,
correctness, inclusion probabilities and strata, fed to the same console.stats functions (served
counts by `np.count_nonzero(scores >= t)` per cutoff, the fastest numpy way for a handful of
cutoffs). Targets (the project's, listed in bench/README.md): under 1 s per request and within
3x of numpy.

Two API figures are printed: "cold" runs with the result cache emptied first, so every request
queries PostgreSQL and computes (this is the figure the targets are checked against); "cached"
is the steady state once the recompute job has stored the result for the route's current data.

The data is loaded once with COPY into the benchmark database (`.console/bench`) and reused
while its counts are right; the graded sample is stratified by score band (6,000 below 0.5,
8,000 in [0.5, 0.9), 6,000 at or above 0.9), so the table is Hajek-weighted, the heavier case.

    .venv/bin/python bench/stats.py [--repeat 5] [--decisions 1000000] [--quick] [--long] [--data-dir DIR]

`--quick` is `--decisions 20000 --repeat 2` in `.console/bench-quick`: seconds, same code paths.

`--long` times a long route instead (issue 31): the same 1,000,000 decisions and 20,000 graded
answers, each graded claim by claim with 12 verifiable claims (per-claim support rising with the
score), harm model `at_least` with s0 = 0.9 so every long-answer column is computed. One cold
request of the operating-points table (short and long columns, the Pr(S = 1)-by-n table, precision
and recall) against numpy computing the same figures from arrays in memory with the same
console.stats functions, in the same run; the target is within 3x. Its route is
`bench-stats-long` (`bench-stats-long-<size>` at other sizes).
Another size than 1,000,000 scales the strata in proportion (never above the full size's) and gets
a route of its own (`bench-stats-<size>`), so data sets of several sizes can share a database.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from common import add_arguments, bench_reviewer, data_dir, month_partitions, report, setup_django, web_server

ROUTE = "bench-stats"
POPULATION = 1_000_000
QUICK_POPULATION = 20_000
STRATA = (("low", -np.inf, 0.5, 6_000), ("mid", 0.5, 0.9, 8_000), ("high", 0.9, np.inf, 6_000))
IMPORTED = 5_000
CUTOFFS = "0.5,0.7,0.85,0.9,0.95"
CLAIMS = 12
SUPPORT_THRESHOLD = 0.9
SEED = 20261101
COPY_CHUNK = 500_000


@dataclass(frozen=True)
class DataSet:
    """The benchmark's decisions at one size, and their graded sample scaled with it."""

    decisions: int = POPULATION
    long: bool = False

    @property
    def scale(self) -> float:
        return min(1.0, self.decisions / POPULATION)

    @property
    def strata(self) -> tuple[tuple[str, float, float, int], ...]:
        return tuple((name, low, high, max(1, round(size * self.scale))) for name, low, high, size in STRATA)

    @property
    def graded(self) -> int:
        return sum(size for *_, size in self.strata)

    @property
    def imported(self) -> int:
        return max(1, round(IMPORTED * self.scale))

    @property
    def route(self) -> str:
        # The full size keeps the slug its data was first loaded under, so that data is reused.
        base = f"{ROUTE}-long" if self.long else ROUTE
        return base if self.decisions == POPULATION else f"{base}-{self.decisions}"


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--decisions",
        type=int,
        help=f"size of the data set (default {POPULATION:,}; {QUICK_POPULATION:,} with --quick)",
    )
    parser.add_argument(
        "--long", action="store_true", help=f"a long route: graded answers of {CLAIMS} claims (issue 31)"
    )
    add_arguments(parser)


def data_set(args: argparse.Namespace) -> DataSet:
    return DataSet(args.decisions or (QUICK_POPULATION if args.quick else POPULATION), long=args.long)


def claim_counts(rng: np.random.Generator, scores: np.ndarray) -> np.ndarray:
    """Supported claims of each graded answer of CLAIMS claims: per-claim support 0.85 to 0.99."""
    return rng.binomial(CLAIMS, 0.85 + 0.14 * scores)


def synthetic_population(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Gate scores like the demo's (80% answerable), and whether each answer would be correct."""
    answerable = rng.random(size) < 0.8
    scores = np.where(answerable, rng.beta(9, 1.3, size), rng.beta(2, 4, size)).round(4)
    correct = rng.random(size) < np.where(answerable, 0.2 + 0.75 * scores, 0.1)
    return scores, correct


def stratified_sample(
    rng: np.random.Generator, scores: np.ndarray, strata: tuple[tuple[str, float, float, int], ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices of the graded items, their stratum names and inclusion probabilities."""
    chosen, names, probabilities = [], [], []
    for name, low, high, size in strata:
        members = np.flatnonzero((scores >= low) & (scores < high))
        picked = rng.choice(members, size=size, replace=False)
        chosen.append(picked)
        names += [name] * size
        probabilities.append(np.full(size, size / members.size))
    return np.concatenate(chosen), np.array(names), np.concatenate(probabilities)


def load(database_url: str, route_id: int, data: DataSet) -> None:
    """COPY the population, the grading items and the final labels (one transaction)."""
    import psycopg

    population = data.decisions
    rng = np.random.default_rng(SEED)
    scores, correct = synthetic_population(rng, population)
    sample, strata, probabilities = stratified_sample(rng, scores, data.strata)
    start = datetime(2026, 9, 1, tzinfo=UTC)
    seconds = rng.integers(0, 60 * 86400, population)
    models = np.where(rng.random(population) < 0.5, "gen-2026-10", "gen-2026-11")
    languages = np.where(rng.random(population) < 0.75, "en", "de")
    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        month_partitions(cur, [start + timedelta(days=day) for day in range(61)])
        cur.execute("SELECT coalesce(max(id), 0) FROM ledger_decision")
        first_id = cur.fetchone()[0] + 1
        # One COPY per half a million rows: the counters' statement triggers read each COPY's rows
        # back from a transition table, which then stays a manageable size at 10,000,000.
        for chunk in range(0, population, COPY_CHUNK):
            with cur.copy(
                "COPY ledger_decision (id, route_id, request_id, occurred_at, question, claim, gate_name, "
                "gate_score, cutoff, outcome, distinct_served_answer, versions, segments, ingested_at, content_hash) "
                "FROM STDIN"
            ) as copy:
                for i in range(chunk, min(chunk + COPY_CHUNK, population)):
                    at = start + timedelta(seconds=int(seconds[i]))
                    served = scores[i] >= 0.7
                    copy.write_row(
                        (
                            first_id + i,
                            route_id,
                            f"stats-{i:07d}",
                            at,
                            f"How do I reset thing {i % 977}?",
                            "Open Settings > Security and choose Reset.",
                            "entailment",
                            float(scores[i]),
                            0.7,
                            "served" if served else "refused",
                            "Open Settings > Security." if served else None,
                            json.dumps(
                                {
                                    "model": str(models[i]),
                                    "retriever": "hybrid-3",
                                    "corpus": "snap-2026-11-01",
                                    "gate": "nli-4",
                                }
                            ),
                            json.dumps({"language": str(languages[i]), "query_type": "how-to"}),
                            at,
                            i.to_bytes(32, "big"),  # content_hash: a digest is 32 bytes
                        )
                    )
        cur.execute("SELECT setval(pg_get_serial_sequence('ledger_decision', 'id'), %s)", [first_id + population])
        now = datetime.now(UTC)
        cur.execute("SELECT coalesce(max(id), 0) FROM grading_gradingitem")
        first_item = cur.fetchone()[0] + 1
        with cur.copy(
            "COPY grading_gradingitem (id, route_id, decision_id, answer_source, stratum, "
            "inclusion_probability, queue_key, grades_required, status, is_gold, gold_verdict, created_at) "
            "FROM STDIN"
        ) as copy:
            for j, i in enumerate(sample.tolist()):
                copy.write_row(
                    (
                        first_item + j,
                        route_id,
                        first_id + i,
                        "served",
                        str(strata[j]),
                        float(probabilities[j]),
                        int(rng.integers(0, 2**62)),
                        2,
                        "labelled",
                        False,
                        "",
                        now,
                    )
                )
        cur.execute(
            "SELECT setval(pg_get_serial_sequence('grading_gradingitem', 'id'), %s)", [first_item + data.graded]
        )
        # Every NOT NULL column without a database default is named, `note` (the adjudicator's reason,
        # empty unless adjudicated) included: COPY fills none of Django's Python-side defaults.
        # A long route's labels carry claim counts; "correct" is then "every claim supported".
        supported = claim_counts(rng, scores[sample]) if data.long else None
        with cur.copy(
            "COPY grading_finallabel (decision_id, item_id, correct, method, source, note, decided_at, "
            "claims_supported, claims_verifiable) FROM STDIN"
        ) as copy:
            for j, i in enumerate(sample.tolist()):
                imported = j % (data.graded // data.imported) == 0
                copy.write_row(
                    (
                        first_id + i,
                        first_item + j,
                        bool(supported[j] == CLAIMS) if data.long else bool(correct[i]),
                        "imported" if imported else "majority",
                        "legacy-eval" if imported else "",
                        "",
                        now,
                        int(supported[j]) if data.long else None,
                        CLAIMS if data.long else None,
                    )
                )
        conn.commit()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE ledger_decision")
        conn.execute("VACUUM ANALYZE grading_gradingitem")
        conn.execute("VACUUM ANALYZE grading_finallabel")
        conn.execute("VACUUM ANALYZE grading_labelsample")


def ensure_loaded(database_url: str, data: DataSet, folder: Path) -> tuple[int, bool]:
    """The data set's route id, loading the data unless the right counts are already there."""
    from audit.services import Actor
    from console.accounts.models import Route
    from console.accounts.services import route_create
    from console.ledger.models import Decision
    from grading.models import FinalLabel

    route = Route.objects.filter(slug=data.route).first() or route_create(
        actor=Actor.system("bench"), slug=data.route, name=f"Statistics benchmark, {data.decisions:,} decisions"
    )
    if data.long:
        from console.ledger.models import RouteAnswerSettings

        RouteAnswerSettings.objects.update_or_create(
            route=route,
            defaults={"answer_form": "long", "harm_model": "at_least", "support_threshold": SUPPORT_THRESHOLD},
        )
    decisions = Decision.objects.filter(route=route).count()
    labels = FinalLabel.objects.filter(decision__route=route).count()
    if (decisions, labels) == (data.decisions, data.graded):
        return route.pk, False
    if decisions or labels:
        raise SystemExit(
            f"route {data.route} holds {decisions} decisions and {labels} labels, not "
            f"{data.decisions} and {data.graded}; remove {folder} and run again"
        )
    load(database_url, route.pk, data)
    return route.pk, True


def in_memory_arrays(route_id: int) -> tuple[np.ndarray, object]:
    """The population's scores and the graded sample, loaded once (not timed)."""
    from django.db import connection

    from console.accounts.models import Route
    from console.analysis import selectors
    from console.analysis.params import Window

    with connection.cursor() as cursor:
        cursor.execute("SELECT gate_score FROM ledger_decision WHERE route_id = %s", [route_id])
        population = np.array([row[0] for row in cursor.fetchall()], dtype=float)
    return population, selectors.graded_sample(Route.objects.get(pk=route_id), Window())


def numpy_table_and_calibration(population: np.ndarray, sample, cutoffs: list[float]) -> tuple[list, dict]:
    """What the two requests compute, from arrays in memory: same console.stats functions."""
    from console.stats.calibration import calibration_report
    from console.stats.operating_points import operating_points

    served = [int(np.count_nonzero(population >= t)) for t in cutoffs]
    weights, strata = sample.weights_and_strata()
    rows = operating_points(
        population_size=population.size,
        cutoffs=cutoffs,
        served_counts=served,
        graded_scores=sample.scores,
        graded_correct=sample.correct,
        graded_weights=weights,
        graded_strata=strata,
    )
    return rows, calibration_report(sample.scores, sample.correct, 10)


def long_arrays(route_id: int) -> tuple[np.ndarray, object]:
    """The population's scores and the long route's graded sample with claim counts (not timed)."""
    from django.db import connection

    from console.accounts.models import Route
    from console.analysis import selectors
    from console.analysis.params import Window

    with connection.cursor() as cursor:
        cursor.execute("SELECT gate_score FROM ledger_decision WHERE route_id = %s", [route_id])
        population = np.array([row[0] for row in cursor.fetchall()], dtype=float)
    return population, selectors.long_graded_sample(Route.objects.get(pk=route_id), Window())


def numpy_long_table(population: np.ndarray, long, cutoffs: list[float]) -> tuple[list, list]:
    """What the long route's table request computes, from arrays in memory: same console.stats functions."""
    from console.stats.long_answers import full_support_by_claim_count, long_operating_points, precision_recall_at_k
    from console.stats.operating_points import operating_points
    from console.stats.policy_math import cost_threshold

    served = [int(np.count_nonzero(population >= t)) for t in cutoffs]
    sample = long.sample
    weights, strata = sample.weights_and_strata()
    common = {
        "population_size": population.size,
        "cutoffs": cutoffs,
        "served_counts": served,
        "graded_scores": sample.scores,
        "graded_weights": weights,
        "graded_strata": strata,
    }
    rows = operating_points(graded_correct=sample.correct, **common)
    long_rows = long_operating_points(
        claims_supported=long.claims_supported,
        claims_verifiable=long.claims_verifiable,
        harm_model="at_least",
        support_threshold=SUPPORT_THRESHOLD,
        c_w=20.0,
        c_a=0.5,
        **common,
    )
    full_support_by_claim_count(
        long.claims_supported, long.claims_verifiable, weights=weights, strata=strata, tau=cost_threshold(20.0, 0.5)
    )
    precision_recall_at_k(long.claims_supported, long.claims_verifiable, long.expected_claims)
    return rows, long_rows


def main_long(args: argparse.Namespace, data: DataSet, route_id: int, token: str, load_line: str) -> None:
    """One cold request of a long route's table against numpy on the same arrays."""
    from console.analysis.models import StatsResult

    cutoffs = [float(c) for c in CUTOFFS.split(",")]
    population, long = long_arrays(route_id)
    numpy_long_table(population, long, cutoffs)  # scipy's first import is no part of either figure
    numpy_ms, (rows, long_rows) = timed(lambda: numpy_long_table(population, long, cutoffs), args.repeat)
    with web_server(workers=1, threads=1) as url:
        table_url = f"{url}/api/v1/routes/{data.route}/operating-points?cutoffs={CUTOFFS}"
        StatsResult.objects.filter(route_id=route_id).delete()
        get_json(table_url, token)  # warm the worker's imports
        cold = []
        for _ in range(args.repeat):
            StatsResult.objects.filter(route_id=route_id).delete()
            ms, body = timed(lambda: fetch(table_url, token), 1)
            cold.append(ms)
        cached_ms, _ = timed(lambda: fetch(table_url, token), args.repeat)
    table = json.loads(body)
    keys = ("expected_support", "p_fully_supported", "p_support_at_least", "unsupported_claims_per_1000")
    same = all(
        abs(api_row[key][part] - long_row.as_dict()[key][part]) < 1e-9
        for api_row, long_row in zip(table["rows"], long_rows, strict=True)
        for key in keys
        for part in ("value", "low", "high")
        if api_row[key][part] is not None
    )
    cold_ms = statistics.median(cold)

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    report(
        "stats-long",
        [
            f"data: {data.decisions:,} decisions, {data.graded:,} graded answers of {CLAIMS} claims "
            f"(stratified, Hajek-weighted; harm model at_least, s0 = {SUPPORT_THRESHOLD}); {load_line}",
            f"API over HTTP (gunicorn, 1 worker), median of {args.repeat}; numpy on the arrays in memory, same run",
            f"numpy, long table                    : {numpy_ms:8.1f} ms",
            f"API cold, long table                 : {cold_ms:8.1f} ms  ratio to numpy {cold_ms / numpy_ms:.2f}",
            f"API cached, long table               : {cached_ms:8.1f} ms  ratio to numpy {cached_ms / numpy_ms:.2f}",
            f"API long columns equal numpy's       : {'yes' if same else 'NO'}",
            f"cold within 3x of numpy              : {cold_ms / numpy_ms:.2f}x {verdict(cold_ms <= 3 * numpy_ms)}",
        ],
    )


def fetch(url: str, token: str) -> bytes:
    """The response body, read whole."""
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def get_json(url: str, token: str) -> dict:
    return json.loads(fetch(url, token))


def timed(function, repeat: int) -> tuple[float, object]:
    """Median wall time in ms over `repeat` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, help="requests per figure (default 5; 2 with --quick)")
    add_size_arguments(parser)
    args = parser.parse_args()
    args.repeat = args.repeat or (2 if args.quick else 5)
    data = data_set(args)
    folder = data_dir(args)
    database_url = setup_django(folder)
    load_started = time.perf_counter()
    route_id, loaded = ensure_loaded(database_url, data, folder)
    load_seconds = time.perf_counter() - load_started

    from audit.services import Actor
    from console.accounts import services as accounts
    from console.analysis.models import StatsResult

    token = accounts.token_issue(actor=Actor.system("bench"), user=bench_reviewer()).key
    if data.long:
        load_line = f"loaded with COPY in {load_seconds:.1f} s" if loaded else "reused from an earlier run"
        main_long(args, data, route_id, token, load_line)
        return

    cutoffs = [float(c) for c in CUTOFFS.split(",")]
    population, sample = in_memory_arrays(route_id)
    numpy_ms, (rows, calibration) = timed(lambda: numpy_table_and_calibration(population, sample, cutoffs), args.repeat)

    def forget() -> None:
        StatsResult.objects.filter(route_id=route_id).delete()

    with web_server(workers=1, threads=1) as url:
        table_url = f"{url}/api/v1/routes/{data.route}/operating-points?cutoffs={CUTOFFS}"
        calibration_url = f"{url}/api/v1/routes/{data.route}/calibration?bins=10"
        forget()
        get_json(table_url, token), get_json(calibration_url, token)  # warm the worker's imports
        cold_table, cold_calibration, parse = [], [], []
        for _ in range(args.repeat):
            forget()
            ms, table_body = timed(lambda: fetch(table_url, token), 1)
            cold_table.append(ms)
            ms, calibration_body = timed(lambda: fetch(calibration_url, token), 1)
            cold_calibration.append(ms)
            started = time.perf_counter()
            table, api_calibration = json.loads(table_body), json.loads(calibration_body)
            parse.append(1000 * (time.perf_counter() - started))
        cached_table_ms, _ = timed(lambda: fetch(table_url, token), args.repeat)
        cached_calibration_ms, _ = timed(lambda: fetch(calibration_url, token), args.repeat)

    same = (
        all(
            abs((api_row[key]["value"] or 0) - (row.as_dict()[key]["value"] or 0)) < 1e-9
            for api_row, row in zip(table["rows"], rows, strict=True)
            for key in ("abstention_rate", "wrong_served_per_1000")
            if api_row[key]
        )
        and abs(api_calibration["auroc"] - calibration["auroc"]) < 1e-12
    )
    table_ms, calibration_ms = statistics.median(cold_table), statistics.median(cold_calibration)
    cold_ms = table_ms + calibration_ms
    cached_ms = cached_table_ms + cached_calibration_ms
    slowest = max(table_ms, calibration_ms)

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    report(
        "stats",
        [
            f"data: {data.decisions:,} decisions, {data.graded:,} graded (stratified, Hajek-weighted); "
            + (f"loaded with COPY in {load_seconds:.1f} s" if loaded else "reused from an earlier run"),
            f"API over HTTP (gunicorn, 1 worker), median of {args.repeat}; numpy on the arrays in memory, same run",
            f"numpy, table + calibration           : {numpy_ms:8.1f} ms",
            f"API cold, table                      : {table_ms:8.1f} ms (SQL aggregate + graded values_list + stats)",
            f"API cold, calibration                : {calibration_ms:8.1f} ms",
            f"API cold, table + calibration        : {cold_ms:8.1f} ms  ratio to numpy {cold_ms / numpy_ms:.2f}",
            f"API cached, table + calibration      : {cached_ms:8.1f} ms  ratio to numpy {cached_ms / numpy_ms:.2f}",
            f"client's json.loads of the two bodies: {statistics.median(parse):8.1f} ms (not in the API figures)",
            f"API rows and AUROC equal numpy's     : {'yes' if same else 'NO'}",
            f"cold request under 1 s               : slowest {slowest:.0f} ms {verdict(slowest < 1000)}",
            f"cold within 3x of numpy              : {cold_ms / numpy_ms:.2f}x {verdict(cold_ms <= 3 * numpy_ms)}",
            f"cached within 3x of numpy            : {cached_ms / numpy_ms:.2f}x {verdict(cached_ms <= 3 * numpy_ms)}",
        ],
    )


if __name__ == "__main__":
    main()
