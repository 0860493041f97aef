"""Grading queue: 16 concurrent graders over 100,000 pending items, through the real HTTP API.

Setup (not timed): a fresh route whose 100,000 decisions (3 passages each) and pool items are
written with COPY, 16 users with the grader role on it, and gunicorn (4 workers x 4 threads) on
loopback. Then each grader, in its own thread with a keep-alive connection, loops for
`--seconds`: `POST /api/v1/grading/next`, thinks `--think-ms` on average (uniform 0..2x), and
grades the item (one in ten skipped) with `POST /api/v1/grading/items/{id}/grades`. The think time
stands in for the person: 0.5 s is some 50 times faster than a grader reading passages, so the
server sees far more traffic than 16 people make. Reported: p50/p95/p99 of `next`, p50/p95 of
grading, the HTTP floor (`next` on a route with nothing to grade: authentication, role check and
an empty claim, 204) and the ratio of `next` to it; then `--saturation-seconds` with no think
time at all, which shows the machine's capacity and is not part of PASS.

Then the same load on a long route (issue 31: answers of `--claims` claims each, graded claim by
claim; half the decisions carry their claims as sent, half are split by the span verifier's rule),
by a second set of graders: the claim-level queue must keep `next` p50 within 1.5x of the short
route's (`LONG_RATIO_TARGET`).

Checks, from the clients' records and from the database: no grader was handed an item twice, and
no item was ever held by more than k graders (k = 2; skipped leases give their place back).
Target (the project's, listed in bench/README.md): p95 of `next` < 30 ms. The run's rows are
deleted afterwards (the audit trail, which refuses deletes, keeps its events). About 1.5 minutes;
always exits 0.

    .venv/bin/python bench/grading_queue.py [--items 100000] [--graders 16] [--seconds 40] [--think-ms 500]
                                            [--quick] [--data-dir DIR]

`--quick` runs 2,000 items, 4 graders, 2 s with 20 ms think time and 1 s of saturation on
gunicorn 1 x 4: seconds, same code paths and the same checks (the figures mean nothing).
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import secrets
import threading
import time
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime
from urllib.parse import urlsplit

from common import add_arguments, data_dir, month_partitions, report, setup_django, web_server

K = 2
TARGET_P95_MS = 30.0
LONG_RATIO_TARGET = 1.5
CLAIMS_PER_ANSWER = 12
# (full, quick) defaults of the sizes; an option given on the command line wins over both.
DEFAULTS = {
    "items": (100_000, 2_000),
    "graders": (16, 4),
    "seconds": (40.0, 2.0),
    "think_ms": (500.0, 20.0),
    "saturation_seconds": (10.0, 1.0),
    "workers": (4, 1),
    "threads": (4, 4),
}


def percentile(values: list[float], q: float) -> float:
    if not values:  # nothing measured (a loaded machine in --quick): report nan rather than crash
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _long_answer(n: int, claims: int) -> str:
    return " ".join(f"Step {j} of answer {n} holds." for j in range(claims))


def load_items(database_url: str, route_id: int, count: int, run: str, claims: int = 0) -> None:
    """COPY `count` decisions with 3 passages each and their pool items (half refused, half served).

    With `claims`, each answer makes that many claims, and every other decision carries them as sent."""
    import psycopg

    from console.ledger.compression import compress_text
    from console.ledger.models import PassageOrigin

    now = datetime.now(UTC)
    origin = PassageOrigin.of(route_id, "snap", "bench").pk
    with psycopg.connect(database_url) as conn, conn.cursor() as cur:
        with cur.copy("COPY ledger_passage (external_id, text, uri, content_key, origin_id) FROM STDIN") as copy:
            for n in range(300):
                copy.write_row(
                    (
                        f"kb/{run}/{n}",
                        compress_text(f"Passage {n} of the benchmark corpus, run {run}. " * 8),
                        "",
                        secrets.token_bytes(32),
                        origin,
                    )
                )
        month_partitions(cur, [now])
        cur.execute("SELECT id FROM ledger_passage WHERE external_id LIKE %s", [f"kb/{run}/%"])
        passage_ids = [row[0] for row in cur.fetchall()]
        with cur.copy(
            "COPY ledger_decision (route_id, request_id, occurred_at, question, claim, gate_name, "
            "gate_score, cutoff, outcome, distinct_served_answer, versions, segments, ingested_at, content_hash, "
            "claims, passage_ids, passage_ranks, retrieval_scores) FROM STDIN"
        ) as copy:
            for n in range(count):
                score = random.random()
                served = score >= 0.5
                claim = _long_answer(n, claims) if claims else f"Claim {n}."
                sent = None
                if claims and n % 2:
                    sent = json.dumps([{"text": f"Step {j} of answer {n} holds."} for j in range(claims)])
                copy.write_row(
                    (
                        route_id,
                        f"q-{n:06d}",
                        now,
                        f"Benchmark question {n}?",
                        claim,
                        "nli",
                        score,
                        0.5,
                        "served" if served else "refused",
                        None if not served or claims else f"Answer {n}.",
                        "{}",
                        "{}",
                        now,
                        secrets.token_bytes(32),  # content_hash
                        sent,
                        random.sample(passage_ids, 3),  # three ranked passages, as ingest stores them
                        None,  # their ranks, 1..3
                        [0.5, 0.5, 0.5],
                    )
                )
        cur.execute("SELECT id, outcome <> 'refused' FROM ledger_decision WHERE route_id = %s", [route_id])
        decisions = cur.fetchall()
        # The items read their question and answer (the served answer or the claim) from the decision,
        # as the pool's own items do.
        with cur.copy(
            "COPY grading_gradingitem (route_id, decision_id, answer_source, stratum, "
            "inclusion_probability, queue_key, grades_required, status, is_gold, gold_verdict, created_at) "
            "FROM STDIN"
        ) as copy:
            for decision_id, served in decisions:
                copy.write_row(
                    (
                        route_id,
                        decision_id,
                        "served" if served else "claim",
                        "all",
                        1.0,
                        secrets.randbits(63),
                        K,
                        "open",
                        False,
                        "",
                        now,
                    )
                )
        conn.commit()
        for table in ("ledger_decision", "grading_gradingitem"):
            cur.execute(f"ANALYZE {table}")
        conn.commit()


class Grader:
    def __init__(self, base_url: str, token: str, name: str, empty_route: str) -> None:
        self.empty_route = empty_route
        parts = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.name = name
        self.next_ms: list[float] = []
        self.grade_ms: list[float] = []
        self.floor_ms: list[float] = []
        self.items: list[str] = []
        self.skipped: set[str] = set()
        self.errors: list[str] = []

    def call(self, path: str, body: dict | None) -> tuple[int, bytes, float]:
        for attempt in (1, 2):
            started = time.perf_counter()
            try:
                self.conn.request("POST", path, body=json.dumps(body or {}), headers=self.headers)
                response = self.conn.getresponse()
                data = response.read()
                return response.status, data, (time.perf_counter() - started) * 1000
            except (http.client.HTTPException, OSError):
                # gunicorn closes idle keep-alive connections; open a new one and send again
                self.conn.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def work(self, until: float, think_ms: float, measure: bool = True) -> None:
        while time.monotonic() < until:
            status, data, ms = self.call("/api/v1/grading/next", {})
            if status == 204:
                return
            if status != 200:
                self.errors.append(f"next {status}: {data[:120]!r}")
                return
            item = json.loads(data)["item"]
            item_id = item["id"]
            if measure:
                self.next_ms.append(ms)
                self.items.append(item_id)
            time.sleep(random.uniform(0, 2 * think_ms) / 1000)
            if random.random() < 0.1:
                status, data, ms = self.call(f"/api/v1/grading/items/{item_id}/skip", None)
                self.skipped.add(item_id)
                expected = 204
            else:
                if "claims" in item:  # a long route: a verdict for every claim
                    choices = ["supported"] * 8 + ["unsupported", "unverifiable"]
                    verdicts = [{"index": c["index"], "verdict": random.choice(choices)} for c in item["claims"]]
                    body = {"claims": verdicts}
                else:
                    body = {"verdict": random.choice(["correct", "correct", "incorrect", "unsure"])}
                status, data, ms = self.call(f"/api/v1/grading/items/{item_id}/grades", body)
                expected = 201
                if measure:
                    self.grade_ms.append(ms)
            if status != expected:
                self.errors.append(f"grade {status}: {data[:120]!r}")
            # One floor call per 10 items, from each grader's first on, so short runs measure it too.
            if measure and len(self.next_ms) % 10 == 1:
                _status, _data, ms = self.call("/api/v1/grading/next", {"route": self.empty_route})
                self.floor_ms.append(ms)


def run_phase(graders: list[Grader], seconds: float, think_ms: float, measure: bool = True) -> float:
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=g.work, args=(until, think_ms, measure)) for g in graders]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def database_checks(route_id: int) -> tuple[int, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT a.item_id FROM grading_assignment a JOIN grading_gradingitem i "
            "ON i.id = a.item_id WHERE i.route_id = %s AND NOT a.skipped GROUP BY a.item_id "
            "HAVING count(*) > %s) over_k",
            [route_id, K],
        )
        over_k = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM (SELECT a.item_id, a.grader_id FROM grading_assignment a JOIN grading_gradingitem i "
            "ON i.id = a.item_id WHERE i.route_id = %s GROUP BY 1, 2 HAVING count(*) > 1) twice",
            [route_id],
        )
        twice = cursor.fetchone()[0]
    return over_k, twice


def cleanup(route_id: int, run: str) -> None:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        items = "SELECT id FROM grading_gradingitem WHERE route_id = %s"
        for statement in (
            f"DELETE FROM grading_assignment WHERE item_id IN ({items})",
            "DELETE FROM grading_claimgrade WHERE grade_id IN "
            f"(SELECT id FROM grading_grade WHERE item_id IN ({items}))",
            f"DELETE FROM grading_grade WHERE item_id IN ({items})",
            "DELETE FROM grading_finalclaimlabel WHERE label_id IN (SELECT id FROM grading_finallabel WHERE "
            "decision_id IN (SELECT id FROM ledger_decision WHERE route_id = %s))",
            "DELETE FROM grading_finallabel WHERE decision_id IN (SELECT id FROM ledger_decision WHERE route_id = %s)",
            "DELETE FROM grading_gradingitem WHERE route_id = %s",
            "DELETE FROM ledger_decision WHERE route_id = %s",
            # Every table with a foreign key to the route: Django's on_delete cascades are not
            # in the database, so raw SQL names them all (the day and score counters, the plan, the
            # stored statistics).
            "DELETE FROM ledger_routedaycount WHERE route_id = %s",
            "DELETE FROM ledger_routescorecount WHERE route_id = %s",
            "DELETE FROM ledger_routescoretotal WHERE route_id = %s",
            "DELETE FROM ledger_routecutoffcount WHERE route_id = %s",
            "DELETE FROM ledger_requestkey WHERE route_id = %s",
            "DELETE FROM ledger_decisionprofile WHERE route_id = %s",
            "DELETE FROM grading_gradingplan WHERE route_id = %s",
            "DELETE FROM grading_routegradingsettings WHERE route_id = %s",
            "DELETE FROM ledger_routeanswersettings WHERE route_id = %s",
            "DELETE FROM shadow_routeshadowsettings WHERE route_id = %s",
            "DELETE FROM policy_statsresult WHERE route_id = %s",
            "DELETE FROM accounts_rolegrant WHERE route_id = %s",
        ):
            cursor.execute(statement, [route_id])
        cursor.execute("DELETE FROM ledger_passage WHERE external_id LIKE %s", [f"kb/{run}/%"])
        cursor.execute("DELETE FROM ledger_passageorigin WHERE route_id = %s", [route_id])  # the run's passages' only
        cursor.execute("DELETE FROM ledger_route WHERE id = %s", [route_id])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int)
    parser.add_argument("--graders", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--think-ms", type=float)
    parser.add_argument("--saturation-seconds", type=float)
    parser.add_argument("--workers", type=int, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, help="threads per gunicorn worker")
    parser.add_argument("--claims", type=int, default=CLAIMS_PER_ANSWER, help="claims per answer on the long route")
    add_arguments(parser)
    args = parser.parse_args()
    for name, (full, quick) in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    database_url = setup_django(data_dir(args))

    from audit.services import Actor
    from console.accounts import services as accounts
    from console.accounts.services import route_create
    from console.ledger.models import AnswerForm
    from console.ledger.services import route_answer_settings_set
    from grading.services.pool import route_grading_set

    actor = Actor.system("bench")
    run = uuid.uuid4().hex[:8]
    route = route_create(actor=actor, slug=f"queue-{run}", name="Queue benchmark")
    route_grading_set(actor=actor, route=route, graders_per_item=K, guidelines="Grade the answer **as written**.")
    started = time.perf_counter()
    load_items(database_url, route.pk, args.items, run)
    setup_seconds = time.perf_counter() - started
    long_route = route_create(actor=actor, slug=f"queue-{run}-long", name="Queue benchmark, long answers")
    route_grading_set(actor=actor, route=long_route, graders_per_item=K, guidelines="Grade each claim.")
    route_answer_settings_set(actor=actor, route=long_route, answer_form=AnswerForm.LONG)
    load_items(database_url, long_route.pk, args.items, f"{run}-long", claims=args.claims)
    empty = route_create(actor=actor, slug=f"queue-{run}-empty", name="Queue benchmark, nothing to grade")
    tokens, long_tokens = [], []
    for n in range(args.graders):
        user = accounts.user_ensure(actor=actor, username=f"bench-grader-{n:02d}")
        accounts.role_grant(actor=actor, user=user, role="grader", route=route)
        accounts.role_grant(actor=actor, user=user, role="grader", route=empty)
        tokens.append((user.username, accounts.token_issue(actor=actor, user=user).key))
        # the long route's graders hold the same two grants (their route and the empty one), so
        # `next` takes the same path on both
        user = accounts.user_ensure(actor=actor, username=f"bench-long-grader-{n:02d}")
        accounts.role_grant(actor=actor, user=user, role="grader", route=long_route)
        accounts.role_grant(actor=actor, user=user, role="grader", route=empty)
        long_tokens.append((user.username, accounts.token_issue(actor=actor, user=user).key))
    try:
        with web_server(workers=args.workers, threads=args.threads) as url:
            graders = [Grader(url, token, name, empty.slug) for name, token in tokens]
            run_phase(graders, 1.0, 0, measure=False)  # warm connections and caches
            load_seconds = run_phase(graders, args.seconds, args.think_ms)
            measured = {name: [getattr(g, name) for g in graders] for name in ("next_ms", "grade_ms", "floor_ms")}
            for g in graders:
                g.next_ms, g.grade_ms, g.floor_ms = [], [], []
            saturation_seconds = run_phase(graders, args.saturation_seconds, 0)
            saturated = [ms for g in graders for ms in g.next_ms]
            long_graders = [Grader(url, token, name, empty.slug) for name, token in long_tokens]
            run_phase(long_graders, 1.0, 0, measure=False)
            run_phase(long_graders, args.seconds, args.think_ms)
        over_k, twice = database_checks(route.pk)
        long_over_k, long_twice = database_checks(long_route.pk)
    finally:
        cleanup(route.pk, run)
        cleanup(long_route.pk, f"{run}-long")
        cleanup(empty.pk, run)

    for name, per_grader in measured.items():
        for g, values in zip(graders, per_grader, strict=True):
            setattr(g, name, values)
    next_ms = [ms for g in graders for ms in g.next_ms]
    grade_ms = [ms for g in graders for ms in g.grade_ms]
    floor_ms = [ms for g in graders for ms in g.floor_ms]
    errors = [e for g in graders for e in g.errors]
    duplicates = sum(len(g.items) - len(set(g.items)) for g in graders)
    holders: dict[str, set[str]] = defaultdict(set)
    for g in graders:
        for item in g.items:
            if item not in g.skipped:
                holders[item].add(g.name)
    client_over_k = sum(len(names) > K for names in holders.values())
    labelled = Counter(len(names) for names in holders.values())[K]
    p50, p95, p99 = (percentile(next_ms, q) for q in (0.5, 0.95, 0.99))
    floor = percentile(floor_ms, 0.5)
    long_next = [ms for g in long_graders for ms in g.next_ms]
    long_grade = [ms for g in long_graders for ms in g.grade_ms]
    long_errors = [e for g in long_graders for e in g.errors]
    long_duplicates = sum(len(g.items) - len(set(g.items)) for g in long_graders)
    long_p50 = percentile(long_next, 0.5)
    long_ratio = long_p50 / p50 if p50 else float("nan")
    long_safe = long_duplicates == 0 and long_twice == 0 and long_over_k == 0 and not long_errors
    long_ok = long_safe and long_ratio <= LONG_RATIO_TARGET
    safe = duplicates == 0 and twice == 0 and over_k == 0 and client_over_k == 0 and not errors
    ok = safe and p95 < TARGET_P95_MS
    report(
        "queue",
        [
            f"pending items: {args.items:,} (COPY setup {setup_seconds:.1f} s); graders: {args.graders}, k = {K}; "
            f"think {args.think_ms:g} ms avg; {load_seconds:.1f} s",
            f"POST /grading/next   : {len(next_ms):,} calls ({len(next_ms) / load_seconds:,.0f}/s), "
            f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, p99 {p99:.1f} ms, max {max(next_ms, default=float('nan')):.1f} ms",
            f"POST .../grades      : {len(grade_ms):,} calls, p50 {percentile(grade_ms, 0.5):.1f} ms, "
            f"p95 {percentile(grade_ms, 0.95):.1f} ms; items handed to k graders: {labelled:,}",
            f"next on an empty route (204, the HTTP floor): p50 {floor:.1f} ms; next p50 / floor = {p50 / floor:.2f}",
            f"saturation (no think time, capacity only): {len(saturated) / saturation_seconds:,.0f} next/s, "
            f"p50 {percentile(saturated, 0.5):.1f} ms, p95 {percentile(saturated, 0.95):.1f} ms",
            f"same item twice to one grader: {duplicates} (clients), {twice} (database); "
            f"items held beyond k: {client_over_k} (clients), {over_k} (database); errors: {len(errors)}"
            + (f" e.g. {errors[0]}" if errors else ""),
            f"p95 of next {p95:.1f} ms (target < {TARGET_P95_MS:g} ms), no double leases: {'PASS' if ok else 'FAIL'}",
            f"long route ({args.claims} claims an answer, graded claim by claim): next {len(long_next):,} calls, "
            f"p50 {long_p50:.1f} ms, p95 {percentile(long_next, 0.95):.1f} ms; grades p50 "
            f"{percentile(long_grade, 0.5):.1f} ms; same item twice: {long_duplicates} (clients), {long_twice} "
            f"(database); beyond k: {long_over_k}; errors: {len(long_errors)}"
            + (f" e.g. {long_errors[0]}" if long_errors else ""),
            f"long / short next p50 = {long_ratio:.2f} (target <= {LONG_RATIO_TARGET:g}): "
            f"{'PASS' if long_ok else 'FAIL'}",
        ],
    )


if __name__ == "__main__":
    main()
