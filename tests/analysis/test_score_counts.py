"""The statistics read score bins and the labels' copies of their decisions instead of every
decision: on random data, under random windows and cutoffs, they give what the rows give."""

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest
from django.db.models import Q

from console.analysis import selectors
from console.analysis.params import Window
from console.ledger.models import Decision, RouteScoreCount, RouteScoreTotal
from grading.models import FinalLabel, GradingItem
from tests.analysis.populations import label
from tests.factories import ingest, record, served_record

DAYS = [date(2026, 10, 30) + timedelta(days=i) for i in range(5)]
MODELS = ("gen-a", "gen-b")
LANGUAGES = ("en", "de")


def random_scores(rng: np.random.Generator, n: int) -> np.ndarray:
    """Scores on the 0.001 grid (on bin edges and cutoffs), just below them, continuous, and
    outside [0, 1] (logit-like gates), so that bins straddle cutoffs and ties happen."""
    grid = rng.integers(0, 1001, n) / 1000
    below = np.nextafter(grid, -np.inf)
    continuous = rng.random(n)
    wide = rng.normal(0, 3, n)
    kind = rng.integers(0, 4, n)
    return np.choose(kind, [grid, below, continuous, wide])


def populate(rng: np.random.Generator, *, n: int, route: str) -> None:
    records = []
    for score in random_scores(rng, n).tolist():
        at = datetime.combine(DAYS[rng.integers(0, len(DAYS))], datetime.min.time(), tzinfo=UTC)
        at += timedelta(seconds=int(rng.integers(0, 86400)))
        versions = {"model": str(rng.choice(MODELS)), "gate": "nli-4"}
        segments = {"language": str(rng.choice(LANGUAGES))}
        if rng.random() < 0.3:
            segments["query_type"] = "how-to"
        build = served_record if score >= 0.7 else record
        records.append(
            build(
                route=route,
                occurred_at=at.isoformat(),
                gate={"name": "nli", "score": score, "cutoff": 0.7},
                versions=versions,
                segments=segments,
            )
        )
    ingest(records)


def random_window(rng: np.random.Generator) -> Window:
    first = DAYS[rng.integers(0, len(DAYS))] if rng.random() < 0.5 else None
    last = DAYS[rng.integers(0, len(DAYS))] if rng.random() < 0.5 else None
    if first and last and first > last:
        first, last = last, first
    versions = (("model", str(rng.choice(MODELS + ("gen-none",)))),) if rng.random() < 0.4 else ()
    segments = []
    if rng.random() < 0.4:
        segments.append(("language", str(rng.choice(LANGUAGES))))
    if rng.random() < 0.2:
        segments.append(("query_type", "how-to"))
    return Window(first, last, versions, tuple(segments))


def random_cutoffs(rng: np.random.Generator, route) -> list[float]:
    """Stored scores, their neighbours, round numbers and anything in between."""
    stored = np.array(Decision.objects.filter(route=route).values_list("gate_score", flat=True))
    picked = rng.choice(stored, 3)
    candidates = [
        *picked.tolist(),
        *np.nextafter(picked, np.inf).tolist(),
        *np.nextafter(picked, -np.inf).tolist(),
        0.7,
        0.5,
        float(rng.random()),
        -1e300,
        1e300,
    ]
    return [float(c) for c in rng.choice(candidates, int(rng.integers(1, 8)), replace=False)]


def sample_rows(sample: selectors.GradedSample) -> list[tuple]:
    return sorted(
        zip(
            sample.scores.tolist(),
            sample.correct.tolist(),
            sample.methods.tolist(),
            sample.strata.tolist(),
            sample.inclusion_probability.tolist(),
            sample.imported.tolist(),
            strict=True,
        )
    )


@pytest.mark.parametrize("seed", range(4))
def test_served_counts_from_score_bins_equal_the_counts_over_the_rows(seed, route, other_route):
    rng = np.random.default_rng(seed)
    populate(rng, n=300, route="it-support")
    populate(rng, n=40, route="hr-policy")  # another route's bins never count
    # Edits and deletions go through the same counters (the bounds of a bin only widen).
    chosen = list(Decision.objects.filter(route=route).order_by("?").values_list("pk", flat=True)[:30])
    GradingItem.objects.filter(decision_id__in=chosen[:10]).delete()  # a pool item protects its decision
    Decision.objects.filter(pk__in=chosen[:10]).delete()
    Decision.objects.filter(pk__in=chosen[10:20]).update(gate_score=0.7)
    Decision.objects.filter(pk__in=chosen[20:]).update(occurred_at=datetime(2026, 11, 2, 23, 59, tzinfo=UTC))
    for _ in range(60):
        window, cutoffs = random_window(rng), random_cutoffs(rng, route)
        assert selectors.population_served_counts(route, window, cutoffs) == (
            selectors.population_served_counts_from_rows(route, window, cutoffs)
        ), (window, cutoffs)


@pytest.mark.parametrize("seed", range(3))
def test_graded_samples_from_the_labels_equal_those_read_through_the_decisions(seed, route, other_route):
    rng = np.random.default_rng(100 + seed)
    populate(rng, n=120, route="it-support")
    populate(rng, n=20, route="hr-policy")
    for decision_id in Decision.objects.order_by("?").values_list("pk", flat=True)[:80]:
        kind = rng.integers(0, 3)
        if kind == 0:
            label(decision_id, rng.random() < 0.5, source=str(rng.choice(["eval-a", "eval-b"])))
        else:
            label(
                decision_id,
                rng.random() < 0.5,
                method="majority",
                inclusion_probability=float(rng.choice([0.2, 0.5])),
                stratum=str(rng.choice(["low", "high"])),
            )
    # A decision edited after it was labelled: the label's copy follows.
    moved = FinalLabel.objects.filter(decision__route=route).first().decision_id
    Decision.objects.filter(pk=moved).update(gate_score=0.123, occurred_at=datetime(2026, 11, 3, 1, tzinfo=UTC))
    # Verdicts flipped and labels deleted: the days they touched are packed again.
    written = list(FinalLabel.objects.order_by("?").values_list("pk", flat=True)[:20])
    FinalLabel.objects.filter(pk__in=written[:10]).update(correct=~Q(correct=True))
    FinalLabel.objects.filter(pk__in=written[10:]).delete()
    for _ in range(30):
        window = random_window(rng)
        window = Window(window.date_from, window.date_to)  # the labels answer windows of dates
        fast = selectors._graded_sample(route, window, None)
        rows = selectors.graded_sample_from_decisions(route, window, None)
        assert sample_rows(fast) == sample_rows(rows), window
        assert fast.sources == rows.sources
        assert fast.estimator == rows.estimator
        assert fast.label_counts() == rows.label_counts()  # counted per packed group, or name by name


def long_label(rng: np.random.Generator, decision_id: int) -> None:
    """A long answer's label: k of n verifiable claims supported, correct exactly when all are."""
    if rng.random() < 0.5:
        made = label(decision_id, False, source=str(rng.choice(["eval-a", "eval-b"])))
    else:
        made = label(
            decision_id,
            False,
            method="majority",
            inclusion_probability=float(rng.choice([0.2, 0.5])),
            stratum=str(rng.choice(["low", "high"])),
        )
    n = int(rng.integers(0, 13))
    k = int(rng.integers(0, n + 1))
    FinalLabel.objects.filter(pk=made.pk).update(claims_supported=k, claims_verifiable=n, correct=n > 0 and k == n)


@pytest.mark.parametrize("seed", range(3))
def test_long_graded_samples_from_the_labels_equal_those_read_through_the_decisions(seed, route, other_route):
    rng = np.random.default_rng(200 + seed)
    populate(rng, n=120, route="it-support")
    populate(rng, n=20, route="hr-policy")
    chosen = list(Decision.objects.order_by("?").values_list("pk", flat=True)[:90])
    # Some decisions name their own K before they are labelled, some after (the copy follows).
    Decision.objects.filter(pk__in=chosen[:20]).update(expected_claims=8)
    for decision_id in chosen[:70]:
        long_label(rng, decision_id)
    for decision_id in chosen[70:]:
        label(decision_id, rng.random() < 0.5)  # a short day's label has no counts: left out by both
    Decision.objects.filter(pk__in=chosen[20:35]).update(expected_claims=15)
    moved = FinalLabel.objects.filter(decision__route=route, claims_verifiable__isnull=False).first().decision_id
    Decision.objects.filter(pk=moved).update(gate_score=0.321, occurred_at=datetime(2026, 11, 3, 1, tzinfo=UTC))
    for _ in range(20):
        window = random_window(rng)
        window = Window(window.date_from, window.date_to)  # the labels answer windows of dates
        route_k = None if rng.random() < 0.5 else 12
        fast = selectors._long_sample_from_labels(route, window, route_k)
        rows = selectors.long_graded_sample_from_decisions(route, window, route_k)
        assert fast.sample.size == rows.sample.size, window
        for name in ("scores", "correct", "inclusion_probability", "strata", "imported", "methods"):
            assert np.array_equal(getattr(fast.sample, name), getattr(rows.sample, name)), (name, window)
        for name in ("claims_supported", "claims_verifiable", "expected_claims"):
            assert np.array_equal(getattr(fast, name), getattr(rows, name), equal_nan=True), (name, window)
        assert fast.sample.sources == rows.sample.sources
        assert fast.sample.label_counts() == rows.sample.label_counts()


def test_the_score_bins_are_counted_per_route_day_profile_and_thousandth_of_a_score(route):
    ingest(
        [
            record(gate={"name": "nli", "score": 0.7, "cutoff": 0.7}),
            record(gate={"name": "nli", "score": 0.7004, "cutoff": 0.7}),
            record(gate={"name": "nli", "score": 0.6999, "cutoff": 0.7}),
            record(gate={"name": "nli", "score": 0.7, "cutoff": 0.7}, segments={"language": "de"}),
            record(gate={"name": "nli", "score": -2.5, "cutoff": 0.7}),
        ]
    )
    totals = {row.score_bin: (row.decisions, row.score_low, row.score_high) for row in RouteScoreTotal.objects.all()}
    assert totals == {700: (3, 0.7, 0.7004), 699: (1, 0.6999, 0.6999), -2500: (1, -2.5, -2.5)}
    per_profile = sorted(
        (row.profile.segments.get("language"), row.score_bin, row.decisions)
        for row in RouteScoreCount.objects.select_related("profile")
    )
    assert per_profile == [("de", 700, 1), ("en", -2500, 1), ("en", 699, 1), ("en", 700, 2)]


def test_a_label_copies_its_decisions_route_score_and_time(route):
    [decision_id] = ingest([record(gate={"name": "nli", "score": 0.42, "cutoff": 0.7})])
    made = label(decision_id, True)
    made.refresh_from_db()
    decision = Decision.objects.get(pk=decision_id)
    assert (made.decision_route_id, made.decision_score, made.decision_occurred_at) == (
        decision.route_id,
        0.42,
        decision.occurred_at,
    )


def test_a_label_copies_its_pool_items_stratum_and_inclusion_probability(route):
    sampled, unsampled = ingest([record(), record()])
    made = label(sampled, True, method="majority", inclusion_probability=0.25, stratum="0.5-1")
    imported = label(unsampled, False)  # no item behind it
    made.refresh_from_db()
    imported.refresh_from_db()
    assert (made.item_stratum, made.item_inclusion_probability) == ("0.5-1", 0.25)
    assert (imported.item_stratum, imported.item_inclusion_probability) == (None, None)
