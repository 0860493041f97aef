"""The daily drift monitor over 1,000,000 decisions on 10 routes, against numpy on the same arrays.

Ten routes, each with a signed policy whose window ends 11 days ago, share 1,000,000 decisions over
the last 30 days (COPY, once; reused while the counts are right). Two runs of `monitor_run` are
timed: cold (no stored aggregates: every day of every route is folded with the grouped queries)
and daily (aggregates stored: only the last two days and days whose counter moved are folded
again, then every alarm rule is evaluated). The baseline is numpy on the same arrays in memory:
per route, the day-by-bin counts with `np.bincount` and the same `console.stats` functions
(control chart, CUSUM, PSI, KS, total variation). Target: the daily run under 10 s.

    .venv/bin/python bench/monitor.py              # 1,000,000 decisions
    .venv/bin/python bench/monitor.py --quick      # 20,000 decisions, seconds
    .venv/bin/python bench/monitor.py --decisions 100000
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime, timedelta

import numpy as np
from common import add_arguments, bench_reviewer, data_dir, month_partitions, report, setup_django

ROUTES = 10
DAYS = 30
WINDOW_END_DAYS_AGO = 11
CUTOFF = 0.6
SEED = 20261130


def _slugs(size: int) -> list[str]:
    return [f"monitor-{size}-{i:02d}" for i in range(ROUTES)]


def _synthetic(rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    route = rng.integers(0, ROUTES, size)
    day = rng.integers(0, DAYS, size)  # 0 = 29 days ago, DAYS - 1 = today
    scores = rng.beta(4, 2, size)
    # Route 0 drifts in its last 3 days, so the run opens alarms as well as reading stable routes.
    drift = (route == 0) & (day >= DAYS - 3)
    scores[drift] = np.clip(scores[drift] - 0.2, 0, 1)
    segment = np.where(rng.random(size) < 0.7, "how-to", "policy")
    return {"route": route, "day": day, "score": np.round(scores, 4), "segment": segment}


def load(database_url: str, size: int) -> list[int]:
    """Routes, policies and decisions; returns the route ids (reused when already loaded)."""
    import psycopg
    from django.db import connection

    from console.accounts.models import Route
    from console.governance.models import PolicyVersion
    from console.ledger.models import Decision

    slugs = _slugs(size)
    routes = [Route.objects.get_or_create(slug=slug, defaults={"name": slug})[0] for slug in slugs]
    ids = [r.pk for r in routes]
    if Decision.objects.filter(route_id__in=ids).count() == size:
        return ids
    Decision.objects.filter(route_id__in=ids).delete()
    data = _synthetic(np.random.default_rng(SEED), size)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    seconds = np.random.default_rng(SEED + 1).integers(0, 86400, size)
    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        month_partitions(cur, [today - timedelta(days=day) for day in range(-1, 40)])
        cur.execute("SELECT coalesce(max(id), 0) FROM ledger_decision")
        first_id = cur.fetchone()[0] + 1
        with cur.copy(
            "COPY ledger_decision (id, route_id, request_id, occurred_at, question, claim, gate_name, "
            "gate_score, cutoff, outcome, distinct_served_answer, versions, segments, ingested_at, content_hash) "
            "FROM STDIN"
        ) as copy:
            for i in range(size):
                at = today - timedelta(days=DAYS - 1 - int(data["day"][i])) + timedelta(seconds=int(seconds[i]))
                served = data["score"][i] >= CUTOFF
                copy.write_row(
                    (
                        first_id + i,
                        ids[int(data["route"][i])],
                        f"monitor-{i:07d}",
                        at,
                        "q",
                        "c",
                        "entailment",
                        float(data["score"][i]),
                        CUTOFF,
                        "served" if served else "refused",
                        "a" if served else None,
                        json.dumps({"model": "gen-2026-10", "gate": "nli-4"}),
                        json.dumps({"query_type": str(data["segment"][i])}),
                        at,
                        i.to_bytes(32, "big"),  # content_hash: a digest is 32 bytes
                    )
                )
        cur.execute("SELECT setval(pg_get_serial_sequence('ledger_decision', 'id'), %s)", [first_id + size])
        cur.execute("ANALYZE ledger_decision")
    owner = bench_reviewer()
    window_to = (today - timedelta(days=WINDOW_END_DAYS_AGO)).date().isoformat()
    for route in routes:
        if not PolicyVersion.objects.filter(route=route).exists():
            evidence = json.dumps({"traffic_versions": {"model": "gen-2026-10", "gate": "nli-4"}, "chosen_row": None})
            # Drafted, then signed in the past through the database's signing function: the app's
            # role may not insert a version already in force (governance migration 0005).
            policy = PolicyVersion.objects.create(
                route=route,
                version=1,
                cutoff=CUTOFF,
                owner=owner,
                created_by=owner,
                escalation_contact="bench",
                escalation_channel="mailto:bench@example.org",
                escalation_response_hours=24,
                refusal_message="-",
                rationale="bench",
                filters={"to": window_to},
                evidence_text=evidence,
                evidence_sha256=PolicyVersion.sha256_of(evidence),
                data_version="bench",
            )
            with connection.cursor() as cursor:
                signed_at = today - timedelta(days=WINDOW_END_DAYS_AGO - 1)
                cursor.execute("SELECT governance_policy_sign(%s, %s, %s)", [policy.pk, owner.pk, signed_at])
    return ids


def numpy_monitor(route_index: np.ndarray, day: np.ndarray, score: np.ndarray, segment: np.ndarray) -> int:
    """The same readings from arrays in memory: per route, day x bin counts, then the same statistics."""
    from console.stats.drift import (
        control_chart,
        ks_two_sample_from_counts,
        psi_from_counts,
        total_variation_distance,
        two_sided_bernoulli_cusum,
    )

    window_days = DAYS - WINDOW_END_DAYS_AGO
    flagged = 0
    bins = np.minimum((score * 1000).astype(np.int64), 999)
    for r in range(ROUTES):
        mask = route_index == r
        d, b, s = day[mask], bins[mask], segment[mask]
        counts = np.bincount(d * 1000 + b, minlength=DAYS * 1000).reshape(DAYS, 1000)
        refused = counts[:, : int(CUTOFF * 1000)].sum(axis=1)
        n = counts.sum(axis=1)
        seg = {key: np.bincount(d[s == key], minlength=DAYS) for key in np.unique(s)}
        p0 = refused[:window_days].sum() / n[:window_days].sum()
        chart = control_chart(refused[window_days:], n[window_days:], baseline=p0)
        cusum = two_sided_bernoulli_cusum(
            refused[window_days:], n[window_days:], p0=p0, p1_up=1.5 * p0, p1_down=p0 / 1.5
        )
        base = counts[:window_days].sum(axis=0)
        base_segments = {key: float(v[:window_days].sum()) for key, v in seg.items()}
        for t in range(window_days, DAYS):
            psi_from_counts(base.reshape(10, -1).sum(axis=1), counts[t].reshape(10, -1).sum(axis=1))
            ks_two_sample_from_counts(base, counts[t])
            total_variation_distance(base_segments, {key: float(v[t]) for key, v in seg.items()})
        flagged += int(chart.outside.sum() + cusum.signal.sum())
    return flagged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--decisions", type=int, help="decisions over the 10 routes (default 1,000,000; 20,000 quick)")
    args = parser.parse_args()
    size = args.decisions or (20_000 if args.quick else 1_000_000)
    database_url = setup_django(data_dir(args))
    started = time.perf_counter()
    route_ids = load(database_url, size)
    load_seconds = time.perf_counter() - started

    from django.db.models import Max

    from audit.services import Actor
    from console.accounts.models import Route
    from console.ledger.models import Decision
    from console.monitoring.models import Alarm, DailyAggregate
    from console.monitoring.services.alarms import monitor_route

    routes = list(Route.objects.filter(pk__in=route_ids))
    actor = Actor.system("bench")
    DailyAggregate.objects.filter(route_id__in=route_ids).delete()
    Alarm.objects.filter(route_id__in=route_ids).delete()

    # The run reads the data as of its newest day, so data loaded on an earlier day (or a run that
    # crosses midnight) is read the same way: the last two days refolded, the same days compared.
    newest = Decision.objects.filter(route_id__in=route_ids).aggregate(newest=Max("occurred_at"))["newest"].date()

    def run() -> float:
        begin = time.perf_counter()
        for route in routes:
            monitor_route(actor=actor, route=route, today=newest)
        return time.perf_counter() - begin

    cold = run()
    daily = run()
    open_alarms = Alarm.objects.filter(route_id__in=route_ids, status="open")
    drifting = open_alarms.filter(route_id=route_ids[0]).count()
    stable = open_alarms.exclude(route_id=route_ids[0]).count()
    rows = list(
        Decision.objects.filter(route_id__in=route_ids).values_list("route_id", "occurred_at", "gate_score", "segments")
    )
    index = {route_id: i for i, route_id in enumerate(route_ids)}
    route_index = np.array([index[r[0]] for r in rows])
    day = np.array([DAYS - 1 - (newest - r[1].date()).days for r in rows])
    score = np.array([r[2] for r in rows])
    segment = np.array([r[3]["query_type"] for r in rows])
    begin = time.perf_counter()
    numpy_monitor(route_index, day, score, segment)
    numpy_seconds = time.perf_counter() - begin
    report(
        "monitor",
        [
            f"decisions: {size:,} on {ROUTES} routes over {DAYS} days "
            + (f"(loaded with COPY in {load_seconds:.1f} s)" if load_seconds > 1 else "(reused)"),
            f"cold run (every day folded)   : {cold:.2f} s",
            f"daily run (aggregates stored) : {daily:.2f} s",
            f"numpy on the same arrays      : {numpy_seconds:.3f} s; daily run / numpy = {daily / numpy_seconds:.1f}x",
            f"open alarms after the runs    : {drifting} on route 0 (it drifts in its last 3 days), "
            f"{stable} on the {ROUTES - 1} stable routes",
            f"{'PASS' if daily < 10 else 'FAIL'}: daily run under 10 s",
        ],
    )


if __name__ == "__main__":
    main()
