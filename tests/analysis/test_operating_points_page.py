"""The operating-points page: one view, regions swapped by htmx, CSV export."""

import csv
import io
import re
from urllib.parse import urlencode

import pytest
from django.test import Client

from console.analysis.panels import row_from_document
from console.stats.policy_math import ExchangeRateBisection, recommended_row
from tests.analysis.populations import census, census_world
from tests.factories import make_user

PAGE = "/operating-points/"


@pytest.fixture
def lead(route):
    client = Client()
    client.force_login(make_user("lead", "policy_owner", route))
    return client


graded_world = census_world(n=240, seed=7)


def htmx(client, target, query="", current=""):
    """A region request as htmx sends it: the target's id and the page's address."""
    return client.get(
        f"{PAGE}?{query}",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET=target,
        HTTP_HX_CURRENT_URL=f"http://testserver{PAGE}?{current}",
    )


def test_a_policy_owner_sees_the_table_the_chart_and_every_panel(lead, graded):
    response = lead.get(PAGE)
    assert response.status_code == 200
    page = response.content.decode()
    assert '<a href="/operating-points/" aria-current="page">Operating points</a>' in page
    assert page.count("<tr") >= 7 and "no gate" in page
    assert '<svg class="tradeoff-chart"' in page and "<polyline" in page and "<polygon" in page
    for heading in (
        "Exchange-rate questions",
        "Certified cutoff",
        "Cost threshold",
        "Middle band",
        "Sample-size planner",
    ):
        assert heading in page
    assert "240 imported from offline-eval" in page and "0 blind console grades" in page


def test_the_table_region_alone_answers_an_htmx_request_and_pushes_the_full_address(lead, graded):
    response = htmx(lead, "op-table", "cutoffs=0.3,0.6", current="route=it-support&interval=jeffreys")
    page = response.content.decode()
    assert "<html" not in page and "<h1" not in page
    assert [float(c) for c in re.findall(r'<th scope="row">([0-9.]+)', page)] == [0.3, 0.6]
    assert "Jeffreys at 95%" in page  # the page's interval choice came from its address
    assert response["HX-Push-Url"] == f"{PAGE}?route=it-support&interval=jeffreys&cutoffs=0.3%2C0.6"
    assert "HX-Request" in response["Vary"]
    # The planner's rows follow the new cutoffs (swapped out of band).
    planner = page.split('id="planner" hx-swap-oob="innerHTML"')[1]
    assert "<td>0.3</td>" in planner and "<td>0.85</td>" not in planner


def test_the_settings_form_replaces_the_window_but_keeps_the_cutoffs(lead, graded):
    response = htmx(
        lead,
        "page",
        "settings=1&route=it-support&segment=language%3Dde&confidence=0.9",
        current="cutoffs=0.4&segment.language=en&from=2026-10-01",
    )
    assert response["HX-Push-Url"] == f"{PAGE}?cutoffs=0.4&route=it-support&segment.language=de&confidence=0.9"
    assert "No decisions in this window yet" in response.content.decode()


def test_bad_parameters_are_explained_on_the_page_not_a_crash(lead, graded):
    page = lead.get(f"{PAGE}?cutoffs=0.5,zero&confidence=7&from=soon").content.decode()
    assert "cutoffs must be finite numbers" in page and "confidence must be a number" in page
    assert "from must be a date" in page
    assert "no gate" in page  # the default table is still shown


def test_the_exchange_rate_questions_step_to_r_star_and_highlight_the_recommended_row(lead, graded):
    first = htmx(lead, "bisection").content.decode()
    assert "Would you accept 10 extra refusals" in first
    answers = "y"
    second = htmx(lead, "bisection", f"answers={answers}").content.decode()
    assert "Would you accept 100 extra refusals" in second
    final = htmx(lead, "bisection", "answers=ynyny", current="cutoffs=0.3,0.5,0.7,0.9").content.decode()
    state = ExchangeRateBisection.replay([True, False, True, False, True])
    assert f"r* = {state.r_star:.1f}" in final
    table = lead.get("/api/v1/routes/it-support/operating-points?cutoffs=0.3,0.5,0.7,0.9").json()
    chosen = recommended_row([row_from_document(r) for r in table["rows"]], state.r_star).cutoff
    # The last answer swaps the table too (out of band), with the chosen row highlighted.
    assert 'id="op-table" hx-swap-oob="innerHTML"' in final
    highlighted = re.search(r'<tr class="recommended">\s*<th scope="row">([^<]+)', final).group(1).strip()
    assert highlighted == ("no gate" if chosen is None else f"{chosen:g}")


def test_the_cost_calculator_gives_tau_and_the_citation_adjusted_threshold(lead, graded):
    page = htmx(lead, "cost", "c_w=20&c_a=0.5&q=0.6&c_v=0.2").content.decode()
    assert "τ = 0.9286" in page and "8.12" in page and "τ′ = 0.8355" in page


@pytest.mark.parametrize("query", ["c_w=0.5&c_a=20", "c_w=1&c_a=1", "c_w=20&c_a=0.5&q=1&c_v=0.5"])
def test_costs_that_give_no_threshold_between_0_and_1_are_refused_with_the_reason(lead, graded, query):
    response = htmx(lead, "cost", query)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'class="error" role="alert"' in page and "τ = -" not in page and "τ = 1." not in page


def test_the_planner_reads_the_half_width_of_the_interval_the_table_shows(lead, graded, owner):
    response = htmx(lead, "planner", "half_width=0.05")
    table = owner.get("/api/v1/routes/it-support/operating-points").json()["rows"][1:]
    reading = {r["cutoff"]: r for r in response.context["reading"]}
    checked = 0
    for row in table:
        far = row["false_abstention_rate"]
        if far and far["value"] is not None:
            assert reading[row["cutoff"]]["now"] == pytest.approx((far["high"] - far["low"]) / 2)
            checked += 1
    assert checked and "Wilson interval" in response.content.decode()


def test_the_band_simulator_shows_the_three_treatments(lead, graded):
    page = htmx(lead, "band", "band_lower=0.4&band_cutoff=0.8").content.decode()
    for treatment in ("served", "served with evidence", "refused"):
        assert treatment in page
    assert "0.4 – 0.8" in page
    # Each band says in words what its share of wrong answers means for it.
    assert "rightly refused · " in page and "served wrong · " in page and "correct answers withheld" in page
    assert "Wrong among them" not in page


def test_the_certified_cutoff_panel_speaks_plainly(lead, integrator):
    census(integrator, n=500, seed=1)
    page = htmx(lead, "certified", "alpha=0.25&delta=0.05").content.decode()
    assert re.search(
        r"At cutoff [0-9.]+ the wrong-answer rate among served answers is at most 0.25 with 95% "
        r"confidence on route IT support \(it-support\), all decisions to date",
        page,
    )
    assert "versions corpus snap-2026-11-01; gate nli-4; model gen-2026-10" in page


def test_the_certified_cutoff_panel_takes_a_compact_grid_like_the_api(lead, integrator, owner):
    census(integrator, n=500, seed=1)
    api = owner.get("/api/v1/routes/it-support/certified-cutoff?alpha=0.25&grid=0.6:0.9:0.05").json()
    page = htmx(lead, "certified", "alpha=0.25&grid=0.6:0.9:0.05").content.decode()
    assert api["certified"] and api["statement"].split(" on route")[0] in page
    assert 'value="0.6:0.9:0.05"' in page
    wrong = htmx(lead, "certified", "alpha=0.25&grid=0.9:0.6:0.05").content.decode()
    assert "start:stop:step" in wrong


def test_the_planner_sizes_each_row_and_a_pair_of_cutoffs(lead, graded):
    page = htmx(lead, "planner", "half_width=0.05&compare=0.7-0.85").content.decode()
    assert "Read a row's false-abstention rate to ±5.0%" in page
    assert "Between 0.7 and 0.85 the refused band is" in page


def test_the_calibration_tab_draws_the_reliability_diagram_and_the_risk_coverage_curve(lead, graded):
    page = htmx(lead, "tab-body", "tab=calibration&by=segment.language").content.decode()
    assert '<svg class="reliability-chart"' in page and '<svg class="risk-coverage-chart"' in page
    assert "AUROC" in page and "By segment.language" in page


def test_the_csv_export_has_one_line_per_row_and_names_the_method(lead, graded):
    response = lead.get(f"/operating-points/table.csv?{urlencode({'cutoffs': '0.5,0.8', 'interval': 'jeffreys'})}")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    table = lead.get("/api/v1/routes/it-support/operating-points?cutoffs=0.5,0.8&interval=jeffreys").json()
    assert [r["cutoff"] for r in rows] == ["", "0.5", "0.8"]
    for line, row in zip(rows, table["rows"], strict=True):
        assert float(line["abstention_rate"]) == row["abstention_rate"]["value"]
        assert float(line["wrong_served_per_1000_high"]) == row["wrong_served_per_1000"]["high"]
        assert (line["interval"], line["confidence"], line["tie_policy"]) == (
            "jeffreys",
            "0.95",
            "serve_if_score_gte_cutoff",
        )


def test_graders_cannot_open_the_page_or_the_csv(route, graded):
    client = Client()
    client.force_login(make_user("gail", "grader"))
    assert client.get(PAGE).status_code == 403
    assert client.get("/operating-points/table.csv").status_code == 403


def test_a_route_the_reader_may_not_see_is_not_found(lead, other_route):
    assert lead.get(f"{PAGE}?route=hr-policy").status_code == 404
    assert lead.get(f"{PAGE}?route=nope").status_code == 404


def test_an_admin_without_routes_is_told_how_to_make_one(db):
    client = Client()
    client.force_login(make_user("ada", "admin"))
    page = client.get(PAGE).content.decode()
    assert "No routes yet" in page


def test_after_the_recompute_job_the_default_page_only_reads(lead, graded, route):
    from console.analysis.models import StatsResult
    from console.analysis.tasks import stats_recompute

    assert stats_recompute.delay(route.pk).get() == 6
    stored = dict(StatsResult.objects.values_list("params_key", "computed_at"))
    assert lead.get(PAGE).status_code == 200
    assert lead.get(f"{PAGE}?tab=calibration").status_code == 200
    assert dict(StatsResult.objects.values_list("params_key", "computed_at")) == stored


def test_a_route_with_decisions_but_no_labels_yet_still_reads_well(lead, integrator):
    from tests.analysis.populations import decision_records, post_decisions

    post_decisions(integrator, decision_records([0.2, 0.5, 0.8, 0.95]))
    page = lead.get(PAGE).content.decode()
    assert "<strong>0</strong> graded" in page
    assert "0.5 assumed" in page and "No cutoff is certified" in page
    assert "Nothing graded in this window yet" in lead.get(f"{PAGE}?tab=calibration").content.decode()
