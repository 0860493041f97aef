"""GET /api/v1/routes/{slug}/operating-points, from the outside over HTTP."""

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from console.analysis.models import StatsResult
from console.analysis.tasks import stats_refresh_stale
from grading.models import FinalLabel
from tests.analysis.populations import census, decision_records, label, post_decisions
from tests.factories import make_token

CUTOFFS = [0.5, 0.62, 0.7, 0.85, 0.9, 0.95]


def seed_table(scores, correct, cutoffs):
    """Seed 001's operating_points on a census, computed here independently of console.stats."""
    table = []
    for t in cutoffs:
        refused = scores < t
        table.append(
            {
                "abstention_rate": refused.mean(),
                "false_abstention_rate": correct[refused].mean() if refused.any() else None,
                "correct_withheld": 1000 * (refused & correct).mean(),
                "wrong_served": 1000 * (~refused & ~correct).mean(),
            }
        )
    return table


def get_table(client, query=""):
    response = client.get(f"/api/v1/routes/it-support/operating-points{query}")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("seed", [0, 1])
def test_rows_equal_the_seed_definition_on_a_census(owner, make_census, seed):
    population = make_census(n=300, seed=seed)
    body = get_table(owner, "?cutoffs=" + ",".join(map(str, CUTOFFS)))
    assert body["population"] == 300 and body["graded"] == 300
    no_gate, *rows = body["rows"]
    assert no_gate["cutoff"] is None
    assert no_gate["wrong_served_per_1000"]["value"] == pytest.approx(1000 * (~population.correct).mean(), abs=1e-6)
    assert [row["cutoff"] for row in rows] == CUTOFFS
    for row, expected in zip(rows, seed_table(population.scores, population.correct, CUTOFFS), strict=True):
        assert row["abstention_rate"]["value"] == pytest.approx(expected["abstention_rate"], abs=1e-6)
        if expected["false_abstention_rate"] is not None:
            assert row["false_abstention_rate"]["value"] == pytest.approx(expected["false_abstention_rate"], abs=1e-6)
        assert row["correct_withheld_per_1000"]["value"] == pytest.approx(expected["correct_withheld"], abs=1e-6)
        assert row["wrong_served_per_1000"]["value"] == pytest.approx(expected["wrong_served"], abs=1e-6)


STATSMODELS_NAME = {
    "wilson": "wilson",
    "clopper_pearson": "beta",
    "jeffreys": "jeffreys",
    "agresti_coull": "agresti_coull",
}


@pytest.mark.parametrize("method", list(STATSMODELS_NAME))
@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_intervals_equal_statsmodels_for_the_named_method(owner, make_census, method, confidence):
    population = make_census(n=300, seed=2)
    body = get_table(owner, f"?cutoffs=0.5,0.7,0.85&interval={method}&confidence={confidence}")
    assert (body["interval"], body["confidence"]) == (method, confidence)
    n, alpha = len(population.scores), 1 - confidence
    for row in body["rows"][1:]:
        refused = population.scores < row["cutoff"]
        served_wrong = ~refused & ~population.correct
        expected = {
            "abstention_rate": proportion_confint(refused.sum(), n, alpha=alpha, method=STATSMODELS_NAME[method]),
            "false_abstention_rate": proportion_confint(
                (refused & population.correct).sum(), refused.sum(), alpha=alpha, method=STATSMODELS_NAME[method]
            ),
        }
        wrong_share = proportion_confint(
            served_wrong.sum(), (~refused).sum(), alpha=alpha, method=STATSMODELS_NAME[method]
        )
        expected["wrong_served_per_1000"] = [1000 * (~refused).mean() * bound for bound in wrong_share]
        for key, (low, high) in expected.items():
            assert row[key]["low"] == pytest.approx(low, abs=1e-9), key
            assert row[key]["high"] == pytest.approx(high, abs=1e-9), key


def test_the_exchange_rate_is_the_bands_odds_with_its_exact_interval(owner, make_census):
    population = make_census(n=300, seed=3)
    rows = get_table(owner, "?cutoffs=0.6,0.8")["rows"]
    assert rows[0]["exchange_rate"] is None
    for row, lower in ((rows[1], None), (rows[2], 0.6)):
        in_band = population.scores < row["cutoff"]
        if lower is not None:
            in_band &= population.scores >= lower
        correct, graded = (in_band & population.correct).sum(), in_band.sum()
        low, high = proportion_confint(correct, graded, alpha=0.05, method="beta")
        p = correct / graded
        assert row["exchange_rate"]["value"] == pytest.approx(p / (1 - p), abs=1e-9)
        assert row["exchange_rate"]["low"] == pytest.approx(low / (1 - low), abs=1e-9)
        assert row["exchange_rate"]["high"] == pytest.approx(high / (1 - high), abs=1e-9)
        assert row["band"] == {
            "lower": lower,
            "upper": row["cutoff"],
            "graded": graded,
            "correct": correct,
            "wrong": graded - correct,
        }


def test_every_response_names_its_method_confidence_and_tie_policy(owner, make_census):
    make_census(n=40)
    body = get_table(owner)
    assert body["interval"] == "wilson" and body["confidence"] == 0.95
    assert body["tie_policy"] == "serve_if_score_gte_cutoff"
    assert body["exchange_rate_interval"] == "clopper_pearson"
    assert [row["cutoff"] for row in body["rows"]] == [None, 0.5, 0.7, 0.85, 0.9, 0.95]


def test_a_score_equal_to_the_cutoff_is_served(owner, integrator):
    ids = post_decisions(integrator, decision_records([0.69, 0.7, 0.7, 0.71]))
    for decision_id in ids:
        label(decision_id, True)
    row = get_table(owner, "?cutoffs=0.7")["rows"][1]
    assert (row["refused"], row["served"]) == (1, 3)


def test_the_table_says_which_labels_are_imported_and_which_are_blind_grades(owner, integrator):
    ids = post_decisions(integrator, decision_records([0.2, 0.4, 0.6, 0.8, 0.9]))
    label(ids[0], True, source="legacy-2025")
    label(ids[1], False, source="vendor-set")
    label(ids[2], True, method="majority", inclusion_probability=1.0)
    label(ids[3], False, method="adjudicated", inclusion_probability=1.0)
    body = get_table(owner)
    assert body["labels"] == {
        "imported": 2,
        "blind": 2,
        "imported_sources": ["legacy-2025", "vendor-set"],
        "by_method": {"adjudicated": 1, "imported": 2, "majority": 1},
    }
    assert body["graded"] == 4 and body["population"] == 5


def test_a_stratified_sample_is_hajek_weighted_by_inverse_inclusion_probability(owner, integrator):
    rng = np.random.default_rng(5)
    scores = np.round(rng.uniform(0, 1, 200), 3)
    ids = post_decisions(integrator, decision_records(scores))
    correct = rng.random(200) < scores
    probability = np.where(scores < 0.5, 0.25, 1.0)
    sampled = rng.random(200) < probability
    for decision_id, right, p, keep in zip(ids, correct, probability, sampled, strict=True):
        if keep:
            label(
                decision_id,
                right,
                method="majority",
                inclusion_probability=float(p),
                stratum="low" if p < 1 else "high",
            )
    body = get_table(owner, "?cutoffs=0.7")
    assert body["estimator"] == "hajek"
    refused = sampled & (scores < 0.7)
    weights = 1 / probability
    expected = (weights * correct)[refused].sum() / weights[refused].sum()
    assert body["rows"][1]["false_abstention_rate"]["value"] == pytest.approx(expected, abs=1e-12)
    # The population side is exact whatever was graded.
    assert body["rows"][1]["abstention_rate"]["value"] == pytest.approx((scores < 0.7).mean(), abs=1e-12)


def test_imported_labels_count_as_drawn_with_certainty_even_on_a_sampled_pool_item(owner, integrator):
    ids = post_decisions(integrator, decision_records([0.3, 0.6, 0.9]))
    for decision_id in ids:
        label(decision_id, True, inclusion_probability=0.2)
    assert get_table(owner)["estimator"] == "proportion"


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", 6),
        ("?from=2026-11-01", 4),
        ("?from=2026-10-01&to=2026-10-31", 2),
        ("?to=2026-10-15", 1),
        ("?version.model=gen-2026-11", 3),
        ("?segment.language=de", 2),
        ("?version.model=gen-2026-11&segment.language=de", 1),
        ("?segment.language=fr", 0),
    ],
)
def test_filters_choose_the_population(owner, integrator, query, expected):
    versions = {"model": "gen-2026-10", "retriever": "hybrid-3", "corpus": "snap", "gate": "nli-4"}
    newer = versions | {"model": "gen-2026-11"}
    records = (
        decision_records([0.3], occurred_at="2026-10-10T09:00:00Z", versions=versions)
        + decision_records([0.8], occurred_at="2026-10-20T09:00:00Z", versions=versions, segments={"language": "de"})
        + decision_records([0.4, 0.9], occurred_at="2026-11-02T09:00:00Z", versions=newer)
        + decision_records([0.5], occurred_at="2026-11-03T23:59:59Z", versions=newer, segments={"language": "de"})
        + decision_records([0.95], occurred_at="2026-11-04T00:00:00Z", versions=versions)
    )
    for decision_id in post_decisions(integrator, records):
        label(decision_id, True)
    body = get_table(owner, query)
    assert body["population"] == expected and body["graded"] == expected
    if expected == 0:
        assert body["rows"] == []


def test_the_filters_are_echoed_in_the_response(owner, make_census):
    make_census(n=20)
    body = get_table(owner, "?from=2026-10-01&version.model=gen-2026-10&segment.language=en")
    assert body["filters"] == {
        "from": "2026-10-01",
        "to": None,
        "versions": {"model": "gen-2026-10"},
        "segments": {"language": "en"},
    }


@pytest.mark.parametrize(
    "query, parameter",
    [
        ("?cutoffs=", "cutoffs"),
        ("?cutoffs=0.5,abc", "cutoffs"),
        ("?cutoffs=0.5,nan", "cutoffs"),
        ("?cutoffs=0.5,inf", "cutoffs"),
        ("?cutoffs=0.5,0.5", "cutoffs"),
        ("?cutoffs=" + ",".join(str(i / 100) for i in range(51)), "cutoffs"),
        ("?confidence=0", "confidence"),
        ("?confidence=1", "confidence"),
        ("?confidence=high", "confidence"),
        ("?interval=wald", "interval"),
        ("?from=2026-02-30", "from"),
        ("?from=yesterday", "from"),
        ("?from=2026-11-02&to=2026-11-01", "from"),
        ("?version.=x", "version."),
        ("?segment.language=", "segment.language"),
        ("?segment.lang%20uage=de", "segment.lang uage"),
        ("?segments.language=de", "segments.language"),
        ("?confidence=0.9&confidence=0.95", "confidence"),
    ],
)
def test_bad_parameters_are_refused_with_every_problem_named(owner, make_census, query, parameter):
    make_census(n=10)
    response = owner.get(f"/api/v1/routes/it-support/operating-points{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_parameter"
    assert parameter in [problem["field"] for problem in error["details"]]


def test_several_bad_parameters_are_reported_together(owner, route):
    response = owner.get("/api/v1/routes/it-support/operating-points?confidence=2&interval=x&cutoffs=a")
    assert {p["field"] for p in response.json()["error"]["details"]} == {"confidence", "interval", "cutoffs"}


@pytest.mark.parametrize("path", ["operating-points", "certified-cutoff", "calibration"])
def test_graders_get_403_and_strangers_to_a_route_get_404(path, grader, owner, outsider, other_route, anonymous):
    assert grader.get(f"/api/v1/routes/it-support/{path}").status_code == 403
    assert outsider.get(f"/api/v1/routes/it-support/{path}").status_code == 403
    assert anonymous.get(f"/api/v1/routes/it-support/{path}").status_code == 401
    # The owner holds a role on it-support only: hr-policy is not theirs to see.
    assert owner.get(f"/api/v1/routes/hr-policy/{path}").json()["error"]["code"] == "not_found"
    assert owner.get(f"/api/v1/routes/no-such-route/{path}").status_code == 404
    assert grader.get(f"/api/v1/routes/it-support/{path}").json()["error"]["code"] == "forbidden"


def test_a_window_without_decisions_has_no_rows(owner, route):
    body = get_table(owner)
    assert (body["population"], body["graded"], body["rows"]) == (0, 0, [])


def test_nothing_graded_leaves_the_graded_columns_empty_but_the_population_exact(owner, integrator):
    post_decisions(integrator, decision_records([0.2, 0.6, 0.9]))
    row = get_table(owner, "?cutoffs=0.5")["rows"][1]
    assert row["abstention_rate"]["value"] == pytest.approx(1 / 3)
    assert row["false_abstention_rate"] is None and row["wrong_served_per_1000"] is None


def _fresh_token(client):
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(client.user)}")


@pytest.mark.parametrize("path", ["operating-points?cutoffs=0.3,0.5,0.7,0.9", "calibration", "certified-cutoff"])
def test_the_query_count_does_not_grow_with_the_rows(owner, integrator, django_assert_num_queries, path):
    # token (read, last used), grants, route, data version, stored result; when computing also the
    # graded sample, the population (operating points) or the graded dates and versions (certified
    # cutoff), and the store: one statement (it was a savepoint, the insert and the release); the
    # table and calibration also read the route's answer settings (a long route adds its columns)
    computing = {"operating-points": 10, "calibration": 9, "certified-cutoff": 10}[path.split("?")[0]]
    for size in (5, 120):
        census(integrator, n=size, seed=size)
        for expected in (computing, 6):  # first computed, then read back
            _fresh_token(owner)
            with django_assert_num_queries(expected):
                assert owner.get(f"/api/v1/routes/it-support/{path}").status_code == 200


def test_results_are_reused_until_a_decision_or_a_label_changes(owner, integrator, make_census):
    make_census(n=30)
    first = get_table(owner)
    assert get_table(owner)["computed_at"] == first["computed_at"]
    assert StatsResult.objects.count() == 1

    [extra] = post_decisions(integrator, decision_records([0.99]))
    after_ingest = get_table(owner)
    assert after_ingest["population"] == 31 and after_ingest["graded"] == 30
    assert after_ingest["data_version"] != first["data_version"]

    label(extra, False)
    after_label = get_table(owner)
    assert after_label["graded"] == 31

    flipped = FinalLabel.objects.get(decision_id=extra)
    flipped.correct = True
    flipped.save()
    assert get_table(owner)["rows"][0]["wrong_served_per_1000"] != after_label["rows"][0]["wrong_served_per_1000"]
    assert StatsResult.objects.count() == 1  # one row per query, replaced in place


def test_blind_grades_on_another_route_leave_this_routes_results_alone(owner, integrator, make_census, other_route):
    make_census(n=20)
    first = get_table(owner)
    elsewhere = post_decisions(integrator, decision_records([0.4, 0.8], route="hr-policy"))
    for decision_id in elsewhere:
        label(decision_id, True, method="unanimous", inclusion_probability=1.0)
    assert get_table(owner)["computed_at"] == first["computed_at"]


def test_the_recompute_job_stores_the_defaults_of_every_changed_route(
    make_census, other_route, owner, django_capture_on_commit_callbacks
):
    make_census(n=30)
    with django_capture_on_commit_callbacks(execute=True):
        assert stats_refresh_stale.delay().get() == 2  # both routes have never been computed
    # table (API and page), band, calibration (API and page), certified cutoff
    assert StatsResult.objects.filter(route__slug="it-support").count() == 6
    with django_capture_on_commit_callbacks(execute=True):
        assert stats_refresh_stale.delay().get() == 0
    stored = StatsResult.objects.get(route__slug="it-support", kind="operating_points", params__curve=[])
    response = owner.get("/api/v1/routes/it-support/operating-points")
    assert response.content.decode() == stored.document  # served as the job stored it


def test_the_openapi_schema_lists_the_statistics_endpoints(reviewer):
    paths = reviewer.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    for name in ("operating-points", "certified-cutoff", "calibration"):
        operation = paths[f"/api/v1/routes/{{slug}}/{name}"]["get"]
        assert {"400", "403", "404"} <= set(operation["responses"])
    parameters = {p["name"] for p in paths["/api/v1/routes/{slug}/operating-points"]["get"]["parameters"]}
    assert {"cutoffs", "confidence", "interval", "from", "to"} <= parameters
