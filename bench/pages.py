"""Pages with 1,000,000 decisions in the database: p95 of the dashboard, the refusal list (with
filters and a deep page) and refusal detail pages.

Each page is fetched over HTTP from a real gunicorn server on loopback with a signed-in
session (a reviewer who reads every route), sequentially, after two warm-up requests; the
figure is the whole request (session, queries, template, transfer). The baseline, in the same
run, is the cheapest signed-in request there is: `GET /accounts/login/`, which only loads the
session and the user and redirects. Target (the project's, listed in bench/README.md): p95
under 200 ms for list and detail pages.

The dashboard reads the per-route, per-day counters the database keeps; the list pages by
keyset (a cursor, not an OFFSET) and counts matches up to 1,000. The million decisions are the
statistics benchmark's (`bench/stats.py` loads them with COPY
into `.console/bench` if they are not there yet), half of them refused, two model versions, two
languages, over 60 days, each with a verification result (one in ten with no supporting
passage, written here once); the detail pages are refusals picked at random among them.

    .venv/bin/python bench/pages.py [--requests 30] [--decisions 1000000] [--quick] [--data-dir DIR]

`--quick` reads the statistics benchmark's quick data set (20,000 decisions in
`.console/bench-quick`, loaded here if missing) with 5 requests per page on one gunicorn worker,
and the deep page is a tenth of the decisions down instead of 100,000 rows: seconds, same pages
and queries.
"""

from __future__ import annotations

import argparse
import statistics
import time
import urllib.error
import urllib.request

from common import bench_reviewer, data_dir, report, setup_django, web_server
from stats import add_size_arguments, data_set, ensure_loaded

TARGET_MS = 200.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # the floor is the 302 itself
        return None


def signed_in_cookie() -> str:
    """A session cookie for a reviewer of every route, made the way a login makes it."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(bench_reviewer())
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def ensure_support(database_url: str, route_id: int) -> bool:
    """Verification results for every decision of the route (one in ten with no supporting
    passage), written once with one INSERT ... SELECT; True if they had to be written."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        missing = conn.execute(
            "SELECT count(*) FROM ledger_decision d WHERE d.route_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM verification_decisionsupport s WHERE s.decision_id = d.id)",
            [route_id],
        ).fetchone()[0]
        if not missing:
            return False
        conn.execute(
            "INSERT INTO verification_decisionsupport (decision_id, decision_occurred_at, status, units, "
            "units_supported, expected_support, fully_supported, no_supporting_passage, verifier_version, attempts, "
            "error, verified_at) "
            "SELECT d.id, d.occurred_at, 'done', 1, (d.id %% 10 <> 0)::int, (d.id %% 10 <> 0)::int, "
            "d.id %% 10 <> 0, d.id %% 10 = 0, "
            "'spans-1', 1, '', now() FROM ledger_decision d WHERE d.route_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM verification_decisionsupport s WHERE s.decision_id = d.id)",
            [route_id],
        )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE verification_decisionsupport")
    return True


def fetch_ms(opener: urllib.request.OpenerDirector, url: str, cookie: str) -> tuple[float, int]:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    started = time.perf_counter()
    try:
        with opener.open(request, timeout=60) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:  # the 302 of the floor arrives here
        error.read()
        status = error.code
    return 1000 * (time.perf_counter() - started), status


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, help="requests per page (default 30; 5 with --quick)")
    add_size_arguments(parser)
    args = parser.parse_args()
    args.requests = args.requests or (5 if args.quick else 30)
    data = data_set(args)
    route = data.route
    folder = data_dir(args)
    database_url = setup_django(folder)
    load_started = time.perf_counter()
    route_id, loaded = ensure_loaded(database_url, data, folder)
    supported = ensure_support(database_url, route_id)
    load_seconds = time.perf_counter() - load_started

    from console.ledger.models import Decision
    from console.ledger.selectors import _cursor_of

    cookie = signed_in_cookie()
    # The cursor of the refusal 100,000 rows down the route's list: where "Older →" leads after
    # 2,000 pages (an OFFSET would walk all of them on every request). Smaller data sets go a
    # tenth of their decisions down.
    depth = min(100_000, data.decisions // 10)
    deep = (
        Decision.objects.filter(route_id=route_id, outcome="refused")
        .order_by("-occurred_at", "-pk")[depth : depth + 1]
        .get()
    )
    refused = list(
        Decision.objects.filter(route_id=route_id, outcome="refused")
        .order_by("?")
        .values_list("pk", flat=True)[: args.requests + 2]
    )
    pages = [
        ("dashboard", ["/"]),
        ("refusals, first page", ["/refusals/"]),
        ("refusals of the route", [f"/refusals/?route={route}&outcome=refused"]),
        ("refusals, score band", [f"/refusals/?route={route}&outcome=refused&score_min=0.3&score_max=0.5"]),
        (
            "refusals, model + segment",
            [f"/refusals/?route={route}&outcome=refused&model=gen-2026-10&segment=language%3Dde"],
        ),
        ("refusals, no supporting passage", [f"/refusals/?route={route}&outcome=refused&no_supporting_passage=on"]),
        (f"refusals, {depth:,} rows deep", [f"/refusals/?route={route}&outcome=refused&before={_cursor_of(deep)}"]),
        ("refusal detail (random)", [f"/decisions/{pk}/" for pk in refused]),
    ]
    opener = urllib.request.build_opener(_NoRedirect)
    origin = (
        f"decisions or verification results written in {load_seconds:.0f} s"
        if loaded or supported
        else "already loaded"
    )
    lines = [f"decisions: {data.decisions:,} ({origin}); {args.requests} sequential requests per page after 2 warm-up"]
    verdicts = []
    # One worker in quick mode: one process fewer to start, and the requests still go through gunicorn.
    with web_server(workers=1 if args.quick else 2, threads=2) as url:
        floor = []
        for index in range(args.requests + 2):
            elapsed, status = fetch_ms(opener, url + "/accounts/login/", cookie)
            if status != 302:
                raise SystemExit(f"the session was not accepted (login page answered {status})")
            if index >= 2:
                floor.append(elapsed)
        floor_p50 = statistics.median(floor)
        lines.append(f"{'signed-in floor (302)':<34}: p50 {floor_p50:6.1f} ms, p95 {percentile(floor, 0.95):6.1f} ms")
        for label, paths in pages:
            times = []
            for index in range(args.requests + 2):
                path = paths[index % len(paths)]
                elapsed, status = fetch_ms(opener, url + path, cookie)
                if status != 200:
                    raise SystemExit(f"{path} answered {status}")
                if index >= 2:
                    times.append(elapsed)
            p95 = percentile(times, 0.95)
            ok = p95 < TARGET_MS
            verdicts.append((label, ok))
            lines.append(
                f"{label:<34}: p50 {statistics.median(times):6.1f} ms, p95 {p95:6.1f} ms, "
                f"p95 / floor p50 {p95 / floor_p50:5.1f}  {'ok' if ok else 'MISS'}"
            )
    missed = [label for label, ok in verdicts if not ok]
    lines.append(
        ("PASS" if not missed else "FAIL") + f": {len(verdicts) - len(missed)}/{len(verdicts)} pages "
        f"with p95 under {TARGET_MS:.0f} ms" + (f"; missed: {', '.join(missed)}" if missed else "")
    )
    report("pages", lines)


if __name__ == "__main__":
    main()
