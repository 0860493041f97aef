"""The recheck page's diagnosis names the pattern planted in synthetic traffic, end to end: decisions
in through the ingest API, the recheck opened by ingest, the comparison read through the API."""

from __future__ import annotations

import pytest

from console.ledger.models import Decision
from console.monitoring.models import Recheck
from console.verification.models import DecisionSupport
from tests.analysis.populations import label_each
from tests.monitoring.conftest import VERSIONS, day_start, post_day, sign_policy

NEW = dict(VERSIONS, model="gen-2026-12")
HOWTO = {"query_type": "how-to", "language": "en"}
BILLING = {"query_type": "billing", "language": "en"}


def _planted(integrator, *, days_ago, refused, refused_correct, served, versions, segments=HOWTO, jobs=False):
    """`refused` decisions at score 0.3 of which `refused_correct` graded correct, `served` at 0.9
    (all graded, 90% correct)."""
    ids = post_day(
        integrator,
        days_ago=days_ago,
        scores=[0.3] * refused + [0.9] * served,
        versions=versions,
        segments=segments,
        jobs=jobs,
    )
    label_each(ids, [i < refused_correct if i < refused else (i - refused) % 10 != 0 for i in range(len(ids))])
    return ids


def _no_support(ids, share):
    cut = round(len(ids) * share)
    moments = dict(Decision.objects.filter(pk__in=ids).values_list("pk", "occurred_at"))
    DecisionSupport.objects.bulk_create(
        [
            DecisionSupport(
                decision_id=d, decision_occurred_at=moments[d], status="done", no_supporting_passage=i < cut
            )
            for i, d in enumerate(ids)
        ]
    )


@pytest.fixture
def baseline(integrator, route, owner, reviewer):
    """Signed on 400 decisions: 100 refused (30 correct), 300 served; half how-to, half billing."""
    refused = _planted(integrator, days_ago=20, refused=50, refused_correct=15, served=0, versions=VERSIONS)
    refused += _planted(
        integrator, days_ago=20, refused=50, refused_correct=15, served=0, versions=VERSIONS, segments=BILLING
    )
    _planted(integrator, days_ago=20, refused=0, refused_correct=0, served=150, versions=VERSIONS)
    _planted(integrator, days_ago=20, refused=0, refused_correct=0, served=150, versions=VERSIONS, segments=BILLING)
    _no_support(refused, 0.1)
    return sign_policy(route, owner.user, reviewer.user, filters={"to": day_start(20).date().isoformat()})


def _diagnosis(owner):
    recheck = Recheck.objects.get()
    data = owner.get(f"/api/v1/rechecks/{recheck.pk}").json()
    listed = owner.get("/api/v1/routes/it-support/rechecks").json()["rechecks"]
    assert listed[0]["diagnosis"] == data["diagnosis"]
    return data


def _after(integrator, *, how_to, billing, no_support=0.1):
    refused = []
    for segments, (n_refused, n_correct, n_served) in ((HOWTO, how_to), (BILLING, billing)):
        ids = _planted(
            integrator,
            days_ago=1,
            refused=n_refused,
            refused_correct=n_correct,
            served=0,
            versions=NEW,
            segments=segments,
            jobs=True,
        )
        refused += ids
        _planted(
            integrator,
            days_ago=1,
            refused=0,
            refused_correct=0,
            served=n_served,
            versions=NEW,
            segments=segments,
            jobs=True,
        )
    DecisionSupport.objects.filter(decision_id__in=refused).delete()  # span checks ran; plant the share
    _no_support(refused, no_support)


def test_abstention_up_with_false_abstention_flat_reads_as_a_location_shift(baseline, integrator, owner):
    _after(integrator, how_to=(100, 30, 100), billing=(100, 30, 100))
    data = _diagnosis(owner)
    assert data["diagnosis"]["pattern"] == "location_shift"
    assert "score distribution" in data["diagnosis"]["text"]
    comparison = data["comparison"]
    assert comparison["abstention"]["before"]["value"] == pytest.approx(0.25)
    assert comparison["abstention"]["after"]["value"] == pytest.approx(0.5)
    assert comparison["false_abstention"]["after"]["value"] == pytest.approx(0.3)


def test_both_up_reads_as_a_gate_that_separates_worse(baseline, integrator, owner):
    _after(integrator, how_to=(100, 70, 100), billing=(100, 70, 100))
    data = _diagnosis(owner)
    assert data["diagnosis"]["pattern"] == "separation_worse"
    assert "separates" in data["diagnosis"]["text"]


def test_a_change_carried_by_one_segment_names_it(baseline, integrator, owner):
    _after(integrator, how_to=(50, 15, 150), billing=(170, 51, 30))
    data = _diagnosis(owner)
    assert data["diagnosis"]["pattern"] == "segment"
    assert "query_type=billing" in data["diagnosis"]["text"]
    assert data["comparison"]["segments"][0]["segment"].startswith("language=en, query_type=billing")


def test_more_refusals_with_no_supporting_passage_read_as_retrieval(baseline, integrator, owner):
    _after(integrator, how_to=(100, 30, 100), billing=(100, 30, 100), no_support=0.6)
    data = _diagnosis(owner)
    assert data["diagnosis"]["pattern"] == "retrieval"
    assert "retrieval" in data["diagnosis"]["text"]


def test_the_recheck_page_shows_the_diagnosis_and_the_sample_progress(baseline, integrator, owner, client):
    _after(integrator, how_to=(100, 30, 100), billing=(100, 30, 100))
    recheck = Recheck.objects.get()
    client.force_login(owner.user)
    page = client.get(f"/routes/it-support/rechecks/{recheck.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="diagnosis-pattern">location_shift<' in html and "Accept unchanged" in html
    assert "/routes/it-support/policy/draft/?cutoff=0.6" in html
