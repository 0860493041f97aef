"""GET /api/v1/routes/{slug}/certified-cutoff against an independent implementation of the rule
in docs/statistics.md."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from tests.analysis.populations import decision_records, label, post_decisions


def smallest_certifiable_n(alpha: float, delta: float) -> int:
    """The n at which floor(alpha n / 2) wrong answers would first certify (exact arithmetic)."""
    rate = Fraction(str(alpha))
    n = 1
    while stats.binom.cdf(math.floor(rate * n / 2), n, alpha) > delta:
        n += 1
    return n


def certify_independently(scores, correct, alpha, delta, grid):
    """The rule (docs/statistics.md): high to low, skip small n, certify while the binomial test rejects, stop at the
    first failure; the answer is the last certified cutoff with its one-sided Clopper-Pearson bound."""
    minimum = smallest_certifiable_n(alpha, delta)
    answer = None
    for cutoff in sorted(set(grid), reverse=True):
        served = scores >= cutoff
        n, k = int(served.sum()), int((served & ~correct).sum())
        if n < minimum:
            continue
        if stats.binomtest(k, n, alpha, alternative="less").pvalue > delta:
            break
        answer = {
            "cutoff": cutoff,
            "upper_bound": stats.beta.ppf(1 - delta, k + 1, n - k),
            "graded_served": n,
            "wrong_served": k,
        }
    return answer


def graded_route(integrator, *, n=700, seed=0, error_at_zero=0.6):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.uniform(0, 1, n), 3)
    correct = rng.random(n) >= error_at_zero * (1 - scores) ** 1.5
    for decision_id, right in zip(post_decisions(integrator, decision_records(scores)), correct, strict=True):
        label(decision_id, right)
    return scores, correct


@pytest.mark.parametrize("alpha, delta", [(0.1, 0.05), (0.15, 0.05), (0.2, 0.1), (0.08, 0.2)])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_certified_cutoff_and_its_bound_equal_an_independent_implementation(owner, integrator, alpha, delta, seed):
    scores, correct = graded_route(integrator, seed=seed)
    body = owner.get(f"/api/v1/routes/it-support/certified-cutoff?alpha={alpha}&delta={delta}").json()
    expected = certify_independently(scores, correct, alpha, delta, [i / 100 for i in range(100)])
    assert body["n_start"] == smallest_certifiable_n(alpha, delta)
    assert body["certified"] is (expected is not None)
    if expected:
        assert body["cutoff"] == expected["cutoff"]
        assert body["upper_bound"] == pytest.approx(expected["upper_bound"], abs=1e-9)
        assert body["upper_bound"] <= alpha
        assert (body["graded_served"], body["wrong_served"]) == (expected["graded_served"], expected["wrong_served"])


def test_n_start_is_76_for_the_design_example(owner, integrator):
    graded_route(integrator, n=50)
    assert owner.get("/api/v1/routes/it-support/certified-cutoff").json()["n_start"] == 76


def test_a_chosen_grid_is_scanned_instead_of_the_default(owner, integrator):
    scores, correct = graded_route(integrator, seed=4)
    grid = [0.2, 0.35, 0.5, 0.65, 0.8]
    body = owner.get("/api/v1/routes/it-support/certified-cutoff?alpha=0.12&grid=0.8,0.65,0.5,0.35,0.2").json()
    expected = certify_independently(scores, correct, 0.12, 0.05, grid)
    assert body["certified"] and body["cutoff"] == expected["cutoff"]
    assert [step["cutoff"] for step in body["steps"]][:2] == [0.8, 0.65]


@pytest.mark.parametrize(
    "compact, long_list",
    [
        ("0.5:0.99:0.01", ",".join(f"0.{i}" for i in range(50, 100))),
        ("0:0.99:0.01", ",".join(f"{i / 100:.2f}" for i in range(100))),
        ("0.2:0.6:0.2,0.85,0.9:0.99:0.03", "0.2,0.4,0.6,0.85,0.9,0.93,0.96,0.99"),
    ],
)
def test_a_compact_grid_gives_the_same_answer_as_the_long_list(owner, integrator, compact, long_list):
    graded_route(integrator, seed=2)
    url = "/api/v1/routes/it-support/certified-cutoff?alpha=0.15&grid="
    by_range, by_list = owner.get(url + compact).json(), owner.get(url + long_list).json()
    assert by_range["steps"] and by_range["certified"]
    for body in (by_range, by_list):
        body.pop("computed_at", None)
    assert by_range == by_list


def test_the_largest_grid_fits_in_a_short_query(owner, integrator):
    graded_route(integrator, seed=3)
    body = owner.get("/api/v1/routes/it-support/certified-cutoff?alpha=0.15&grid=0:1:0.001").json()
    assert body["certified"] and round(body["cutoff"], 3) == body["cutoff"]
    tested = [step["cutoff"] for step in body["steps"]]
    assert tested == sorted(tested, reverse=True) and tested[0] == 1.0


def test_too_small_a_sample_is_not_certified_and_says_why(owner, integrator):
    graded_route(integrator, n=60)
    body = owner.get("/api/v1/routes/it-support/certified-cutoff").json()
    assert body["certified"] is False and body["cutoff"] is None
    assert body["reason_code"] == "sample_too_small"
    assert "76" in body["reason"] and body["statement"].startswith("No cutoff is certified")


def test_a_stratified_sample_cannot_be_certified(owner, integrator):
    ids = post_decisions(integrator, decision_records(np.linspace(0.01, 0.99, 200)))
    for i, decision_id in enumerate(ids):
        label(decision_id, True, method="majority", inclusion_probability=0.5 if i % 2 else 1.0)
    body = owner.get("/api/v1/routes/it-support/certified-cutoff").json()
    assert body["certified"] is False and body["reason_code"] == "sample_not_uniform"


def test_the_statement_names_route_window_and_versions(owner, integrator):
    graded_route(integrator, seed=1)
    body = owner.get("/api/v1/routes/it-support/certified-cutoff?alpha=0.15&from=2026-10-01&to=2026-11-30").json()
    assert body["certified"]
    statement = body["statement"]
    assert statement.startswith(
        f"At cutoff {body['cutoff']:g} the wrong-answer rate among served answers is at most 0.15 with 95% confidence"
    )
    assert "IT support (it-support)" in statement
    assert "decisions from 2026-10-01 to 2026-11-30" in statement
    assert "model gen-2026-10" in statement and "gate nli-4" in statement
    assert body["versions"]["model"] == ["gen-2026-10"]
    assert body["confidence"] == 0.95 and body["interval"] == "clopper_pearson_one_sided"


@pytest.mark.parametrize(
    "query, parameter",
    [
        ("?alpha=0", "alpha"),
        ("?alpha=1.5", "alpha"),
        ("?alpha=0.0001", "alpha"),
        ("?delta=0.7", "delta"),
        ("?delta=x", "delta"),
        ("?grid=", "grid"),
        ("?grid=0.1,z", "grid"),
        ("?cutoffs=0.5", "cutoffs"),
        ("?grid=0:1:0.0001", "grid"),
        ("?grid=0.9:0.1:0.1", "grid"),
        ("?grid=0:1:0", "grid"),
        ("?grid=0:1", "grid"),
        ("?grid=0:1:1e-400", "grid"),
        ("?grid=0:0.5:0.1,0.3", "grid"),
        ("?grid=0:1e12:1e-300", "grid"),
    ],
)
def test_bad_certification_parameters_are_refused(owner, route, query, parameter):
    response = owner.get(f"/api/v1/routes/it-support/certified-cutoff{query}")
    assert response.status_code == 400
    assert parameter in [p["field"] for p in response.json()["error"]["details"]]
