"""Populations for the statistics endpoints: decisions go in through the ingest API, labels are
written directly (the label import and blind grading are other apps' business)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

from console.accounts.models import Route
from console.ledger.models import Decision, RouteAnswerSettings
from grading.models import FinalLabel, GradingItem, ItemStatus
from tests.factories import ingest, make_route, record, served_record
from tests.worlds import RouteWorld, build_world, route_world_start

_keys = itertools.count(1)


@dataclass
class Population:
    """What was ingested, in ingest order: ids, scores and (for labelled ones) correctness."""

    ids: np.ndarray
    scores: np.ndarray
    correct: np.ndarray


def decision_records(scores, *, route="it-support", **overrides) -> list[dict]:
    """API records with these gate scores; served at or above 0.7 like the logged gate."""
    records = []
    for score in scores:
        score = float(score)
        build = served_record if score >= 0.7 else record
        records.append(build(route=route, gate={"name": "nli", "score": score, "cutoff": 0.7}, **overrides))
    return records


def post_decisions(integrator, records: list[dict]) -> list[int]:
    """POST /api/v1/decisions in batches; the new decisions' ids in the order given."""
    for start in range(0, len(records), 1000):
        response = integrator.post("/api/v1/decisions", {"decisions": records[start : start + 1000]}, format="json")
        assert response.status_code == 201, response.json()
    ids = dict(
        Decision.objects.filter(request_id__in=[r["request_id"] for r in records]).values_list("request_id", "id")
    )
    return [ids[r["request_id"]] for r in records]


def label(
    decision_id: int,
    correct: bool,
    *,
    method: str = "imported",
    source: str = "offline-eval",
    inclusion_probability: float | None = None,
    stratum: str = "all",
) -> FinalLabel:
    """A final label; with an inclusion probability it hangs on the decision's pool item."""
    item = None
    if inclusion_probability is not None:
        decision = Decision.objects.get(pk=decision_id)
        item = GradingItem.objects.filter(decision=decision, is_gold=False).first()
        if item is None:
            item = GradingItem.objects.create(
                route_id=decision.route_id,
                decision=decision,
                answer_source="claim",
                stratum=stratum,
                inclusion_probability=inclusion_probability,
                queue_key=next(_keys),
                status=ItemStatus.LABELLED,
            )
        else:
            item.stratum, item.inclusion_probability, item.status = stratum, inclusion_probability, ItemStatus.LABELLED
            item.save(update_fields=["stratum", "inclusion_probability", "status"])
    return FinalLabel.objects.create(
        decision_id=decision_id,
        item=item,
        correct=bool(correct),
        method=method,
        source=source if method == "imported" else "",
    )


def label_each(decision_ids, correct) -> None:
    """`label(decision_id, right)` for each pair, in one INSERT: imported labels with no pool item. A
    route of thousands of labels takes a second, where one INSERT per label takes a quarter minute."""
    FinalLabel.objects.bulk_create(
        FinalLabel(decision_id=int(decision_id), correct=bool(right), method="imported", source="offline-eval")
        for decision_id, right in zip(decision_ids, correct, strict=True)
    )


def long_route(**settings) -> RouteAnswerSettings:
    """Make it-support a long route (answer settings written directly: the settings API is the ledger's)."""
    route = Route.objects.get(slug="it-support")
    values = {"answer_form": "long", "harm_model": "all_or_nothing"} | settings
    return RouteAnswerSettings.objects.update_or_create(route=route, defaults=values)[0]


def label_claims(decision_ids, supported, verifiable) -> None:
    """Imported claim-count labels in one INSERT; correct exactly when fully supported."""
    FinalLabel.objects.bulk_create(
        FinalLabel(
            decision_id=int(decision_id),
            correct=bool(n > 0 and k == n),
            method="imported",
            source="claim-eval",
            claims_supported=int(k),
            claims_verifiable=int(n),
        )
        for decision_id, k, n in zip(decision_ids, supported, verifiable, strict=True)
    )


def census(integrator, *, n=300, seed=0, route="it-support", **overrides) -> Population:
    """n decisions with scores on a 0.01 grid (so some equal the cutoffs), every one labelled."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.beta(4, 2, n), 2)
    correct = rng.random(n) < 0.2 + 0.7 * scores
    ids = np.array(post_decisions(integrator, decision_records(scores, route=route, **overrides)))
    label_each(ids.tolist(), correct.tolist())  # the rows `label` would write, in one INSERT
    return Population(ids, scores, correct)


@dataclass(frozen=True, kw_only=True)
class CensusWorld(RouteWorld):
    population: Population


def census_world(*, n: int, seed: int):
    """A module's `graded_world` fixture: it-support, its integrator and `census(n=n, seed=seed)`,
    built once for the module (tests/worlds.py); a test takes the population as `graded`
    (tests/conftest.py). In a test module: `graded_world = census_world(n=240, seed=7)`."""

    def build() -> CensusWorld:
        _route, integrator, made = route_world_start()
        return CensusWorld(**vars(made), population=census(integrator, n=n, seed=seed))

    @pytest.fixture(scope="module")
    def graded_world(django_db_setup, django_db_blocker, tmp_path_factory):
        yield from build_world(django_db_blocker, tmp_path_factory, build)

    return graded_world


def graded_route(*, seed=11, n=300):
    """IT support with `n` decisions, every one labelled, right more often as the score rises:
    the route the browser flows over the analysis page start from."""
    route = make_route("it-support", "IT support")
    rng = np.random.default_rng(seed)
    scores = np.round(rng.beta(4, 2, n), 2)
    correct = rng.random(n) < 0.2 + 0.7 * scores
    for decision_id, right in zip(ingest(decision_records(scores)), correct, strict=True):
        label(int(decision_id), bool(right))
    return route
