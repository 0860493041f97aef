"""A graded route for trials: decisions ingested, labels written directly, a plan per request id."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from console.ledger.models import Decision
from tests.analysis.populations import label
from tests.factories import ingest, record, served_record


@dataclass
class GradedItem:
    request_id: str
    decision_id: int
    correct: bool
    score: float


def graded_items(
    specs: list[tuple[bool, float]],
    *,
    route: str = "it-support",
    cutoff: float = 0.7,
    inclusion: list[float] | None = None,
) -> list[GradedItem]:
    """One decision per (correct, gate score), labelled; served at or above the logged cutoff."""
    records = []
    for _correct, score in specs:
        build = served_record if score >= cutoff else record
        records.append(build(route=route, gate={"name": "nli", "score": score, "cutoff": cutoff}))
    ingest(records)
    ids = dict(
        Decision.objects.filter(request_id__in=[r["request_id"] for r in records]).values_list("request_id", "id")
    )
    items = []
    for index, (r, (correct, score)) in enumerate(zip(records, specs, strict=True)):
        probability = inclusion[index] if inclusion else None
        label(
            ids[r["request_id"]],
            correct,
            method="majority" if probability else "imported",
            inclusion_probability=probability,
            stratum=f"s{probability}",
        )
        items.append(GradedItem(r["request_id"], ids[r["request_id"]], correct, score))
    return items


@pytest.fixture
def trial_body():
    def build(url: str, **overrides) -> dict:
        body = {"name": "evaluator-v2", "url": url, "timeout_s": 0.5, "repeats": 3}
        body.update(overrides)
        return body

    return build
