"""GET /api/v1/routes/{slug}/calibration: the seed's worked example and console.stats on the same data."""

import numpy as np
import pytest

from console.stats.calibration import calibration_by_segment, calibration_report
from tests.analysis.populations import decision_records, label, post_decisions


def labelled_route(integrator, scores, correct, **overrides):
    ids = post_decisions(integrator, decision_records(scores, **overrides))
    for decision_id, right in zip(ids, correct, strict=True):
        label(decision_id, bool(right))


def buckets(groups):
    scores, correct = [], []
    for score, size, right in groups:
        scores += [score] * size
        correct += [True] * right + [False] * (size - right)
    return np.array(scores), np.array(correct)


def test_the_agreement_signal_reproduces_the_seed_worked_example(owner, integrator):
    # Seed 004, section 11.4: eight-probe agreement, 1,000 answers, 738 correct.
    scores, correct = buckets(
        [(1.0, 350, 329), (7 / 8, 200, 168), (6 / 8, 180, 126), (5 / 8, 150, 75), (3 / 8, 120, 40)]
    )
    labelled_route(integrator, scores, correct)
    body = owner.get("/api/v1/routes/it-support/calibration?bins=10").json()
    assert body["n"] == 1000
    assert body["ece"] == pytest.approx(0.06075, abs=1e-6)
    assert body["reliability"] == pytest.approx(0.00450708, abs=1e-6)
    assert body["resolution"] == pytest.approx(0.04476933, abs=1e-6)
    assert body["uncertainty"] == pytest.approx(0.193356, abs=1e-6)
    assert body["auroc"] == pytest.approx(153_888 / 193_356, abs=1e-9)
    assert body["resolution"] / body["uncertainty"] == pytest.approx(0.23153837, abs=1e-6)


def test_the_verbalized_signal_reproduces_the_seed_auroc(owner, integrator):
    scores, correct = buckets([(0.90, 300, 210), (0.95, 400, 300), (1.00, 300, 228)])
    labelled_route(integrator, scores, correct)
    # 40 bins put the three levels in three bins (0.95 sits on an edge, and bins are left-closed).
    body = owner.get("/api/v1/routes/it-support/calibration?bins=40").json()
    assert body["auroc"] == pytest.approx(0.532582387, abs=1e-9)
    assert body["resolution"] / body["uncertainty"] == pytest.approx(0.00328927, abs=1e-6)


def test_the_report_equals_console_stats_on_the_same_data(owner, integrator):
    rng = np.random.default_rng(9)
    scores = np.round(rng.beta(3, 2, 250), 3)
    correct = rng.random(250) < scores
    labelled_route(integrator, scores, correct)
    body = owner.get("/api/v1/routes/it-support/calibration?bins=7").json()
    expected = calibration_report(scores, correct, 7)
    for key, value in expected.items():
        if isinstance(value, list):
            assert len(body[key]) == len(value), key
            for got, want in zip(body[key], value, strict=True):
                assert got == pytest.approx(want, abs=1e-12), key
        else:
            assert body[key] == pytest.approx(value, abs=1e-12), key
    assert body["binning"].startswith("equal-width bins on [0, 1], left-closed")
    assert body["labels"]["imported"] == 250


def test_points_thin_the_curve_but_not_its_area(owner, integrator):
    rng = np.random.default_rng(2)
    scores = rng.uniform(0, 1, 120)
    labelled_route(integrator, scores, rng.random(120) < scores)
    full = owner.get("/api/v1/routes/it-support/calibration").json()
    thin = owner.get("/api/v1/routes/it-support/calibration?points=10").json()
    assert len(full["risk_coverage"]) == 120 and len(thin["risk_coverage"]) == 10
    assert thin["aurc"] == full["aurc"]


def test_by_segment_reports_each_language_like_console_stats(owner, integrator):
    rng = np.random.default_rng(4)
    english, german = rng.uniform(0, 1, 80), rng.uniform(0, 1, 60)
    english_correct, german_correct = rng.random(80) < english, rng.random(60) < 1 - german
    labelled_route(integrator, english, english_correct, segments={"language": "en"})
    labelled_route(integrator, german, german_correct, segments={"language": "de"})
    body = owner.get("/api/v1/routes/it-support/calibration?by=segment.language&bins=5").json()
    assert body["by"] == "segment.language" and body["n"] == 140
    by_value = {s["value"]: s for s in body["segments"]}
    reference = calibration_by_segment(
        np.concatenate([english, german]),
        np.concatenate([english_correct, german_correct]),
        ["en"] * 80 + ["de"] * 60,
        5,
    )
    assert set(by_value) == set(reference) == {"de", "en"}
    for value, report in reference.items():
        for key in ("n", "ece", "auroc", "brier", "aurc"):
            assert by_value[value][key] == pytest.approx(report[key], abs=1e-12), (value, key)
    # Opposite orderings show per language; the global figure mixes them.
    assert by_value["en"]["auroc"] > 0.5 > by_value["de"]["auroc"]


def test_scores_outside_the_unit_interval_cannot_be_binned(owner, integrator):
    labelled_route(integrator, [-0.5, 0.5, 2.0], [True, False, True])
    response = owner.get("/api/v1/routes/it-support/calibration")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "scores_not_probabilities"


@pytest.mark.parametrize(
    "query, parameter",
    [
        ("?bins=0", "bins"),
        ("?bins=101", "bins"),
        ("?bins=2.5", "bins"),
        ("?by=language", "by"),
        ("?by=segment.", "by"),
        ("?points=1", "points"),
        ("?cutoffs=0.5", "cutoffs"),
    ],
)
def test_bad_calibration_parameters_are_refused(owner, route, query, parameter):
    response = owner.get(f"/api/v1/routes/it-support/calibration{query}")
    assert response.status_code == 400
    assert parameter in [p["field"] for p in response.json()["error"]["details"]]
