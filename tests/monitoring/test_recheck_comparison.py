"""The recheck's "signed evidence" column is the signed evidence: on a graded sample stratified by
score band the evidence's shares are Hájek-weighted, and the recheck shows those, not the plain
share of the graded items."""

from __future__ import annotations

import pytest

from console.governance.models import PolicyVersion
from console.monitoring.models import Recheck
from tests.analysis.populations import label
from tests.monitoring.conftest import VERSIONS, day_start, post_day, sign_policy

NEW = dict(VERSIONS, model="gen-2026-12")


@pytest.fixture
def stratified(integrator, route, owner, reviewer) -> PolicyVersion:
    """Signed at cutoff 0.6 on a sample stratified by score band:

    - [0, 0.3): 50 decisions at 0.2, all graded (inclusion 1), 10 correct;
    - [0.3, 0.6): 500 decisions at 0.5, 50 graded (inclusion 0.1), 30 correct;
    - [0.6, 1]: 200 decisions at 0.9, 100 graded (inclusion 0.5), 90 correct.

    False abstention: plain share 40 / 100 = 0.40; Hájek (10 + 30 x 10) / (50 + 50 x 10) = 0.5636."""
    low = post_day(integrator, days_ago=20, scores=[0.2] * 50)
    mid = post_day(integrator, days_ago=20, scores=[0.5] * 500)
    high = post_day(integrator, days_ago=20, scores=[0.9] * 200)
    for i, decision_id in enumerate(low):
        label(decision_id, i < 10, method="majority", inclusion_probability=1.0, stratum="low")
    for i, decision_id in enumerate(mid[:50]):
        label(decision_id, i < 30, method="majority", inclusion_probability=0.1, stratum="mid")
    for i, decision_id in enumerate(high[:100]):
        label(decision_id, i >= 10, method="majority", inclusion_probability=0.5, stratum="high")
    return sign_policy(route, owner.user, reviewer.user, filters={"to": day_start(20).date().isoformat()})


def _new_versions(integrator):
    """The new model: 100 refused at 0.3 (56 graded correct), 100 served at 0.9 (85 graded correct)."""
    refused = post_day(integrator, days_ago=1, scores=[0.3] * 100, versions=NEW, jobs=True)
    served = post_day(integrator, days_ago=1, scores=[0.9] * 100, versions=NEW, jobs=True)
    for i, decision_id in enumerate(refused):
        label(decision_id, i < 56)
    for i, decision_id in enumerate(served):
        label(decision_id, i < 85)


def test_the_signed_evidence_column_shows_the_weighted_figures_the_evidence_was_signed_on(
    stratified, integrator, owner, client
):
    _new_versions(integrator)
    signed = stratified.evidence_document["chosen_row"]
    assert signed["false_abstention_rate"]["value"] == pytest.approx(310 / 550)  # Hájek, not 40 / 100

    recheck = Recheck.objects.get()
    comparison = owner.get(f"/api/v1/rechecks/{recheck.pk}").json()["comparison"]
    far = comparison["false_abstention"]
    assert far["before"] == signed["false_abstention_rate"]
    assert far["after"]["value"] == pytest.approx(0.56)
    assert far["difference"]["value"] == pytest.approx(0.56 - 310 / 550)
    assert far["difference"]["low"] < 0 < far["difference"]["high"]
    assert comparison["abstention"]["before"] == signed["abstention_rate"]
    # Wrong served among graded served: 10 / 100 with equal weights in its band, read back from
    # the evidence's wrong-served-per-1000 (200 of 750 decisions served).
    assert comparison["wrong_served"]["before"]["value"] == pytest.approx(0.1)
    per_1000 = signed["wrong_served_per_1000"]
    assert comparison["wrong_served"]["before"]["low"] == pytest.approx(per_1000["low"] * 750 / 200 / 1000)
    assert comparison["before"]["graded_refused"] == signed["graded_refused"] == 100

    client.force_login(owner.user)
    html = client.get(f"/routes/it-support/rechecks/{recheck.pk}/").content.decode()
    assert f"{310 / 550:.3f}" in html and "0.400" not in html


def test_a_stratified_recheck_sample_is_weighted_too(stratified, integrator, owner):
    """The new versions' shares are the operating-point row of their traffic: Hájek-weighted when
    the recheck sample's inclusion probabilities differ."""
    refused = post_day(integrator, days_ago=1, scores=[0.1] * 20 + [0.5] * 200, versions=NEW, jobs=True)
    post_day(integrator, days_ago=1, scores=[0.9] * 50, versions=NEW, jobs=True)
    for i, decision_id in enumerate(refused[:20]):
        label(decision_id, i < 2, method="majority", inclusion_probability=1.0, stratum="low")
    for i, decision_id in enumerate(refused[20:40]):
        label(decision_id, i < 16, method="majority", inclusion_probability=0.1, stratum="mid")
    recheck = Recheck.objects.get()
    far = owner.get(f"/api/v1/rechecks/{recheck.pk}").json()["comparison"]["false_abstention"]
    # (2 + 16 x 10) / (20 + 20 x 10) = 162 / 220, where the plain share is 18 / 40
    assert far["after"]["value"] == pytest.approx(162 / 220)
