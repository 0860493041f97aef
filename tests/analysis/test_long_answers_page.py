"""The operating-points page of a long route: E[S] beside Pr(S = 1), the mismatch notice, the
Pr(S = 1)-by-n table, and the cost calculator reading tau against each harm model."""

import numpy as np
import pytest
from django.test import Client

from tests.analysis.populations import decision_records, label_claims, long_route, post_decisions
from tests.factories import make_user

PAGE = "/operating-points/"


@pytest.fixture
def lead(route):
    client = Client()
    client.force_login(make_user("lead", "policy_owner", route))
    return client


@pytest.fixture
def chapters_day(integrator):
    """350 briefs of 12 claims: 189 fully supported, 161 with one or two unsupported claims."""
    unsupported = np.array([0] * 189 + [1] * 112 + [2] * 49)
    ids = post_decisions(integrator, decision_records(np.full(350, 0.96)))
    label_claims(ids, 12 - unsupported, np.full(350, 12))


def test_a_long_route_shows_expected_support_beside_full_support_and_flags_the_mismatch(lead, chapters_day):
    long_route(gate_functional="expected_support", expected_claims=12)
    page = lead.get(f"{PAGE}?cutoffs=0.5").content.decode()
    assert "Long answers: which summary of support the gate reads" in page
    assert 'id="functional-mismatch"' in page
    assert "95.0%" in page and "54.0%" in page  # E[S] and Pr(S = 1) on the same rows
    assert "600.0" in page  # unsupported claims per 1,000 questions
    assert 'id="claims-by-n"' in page and "0.9938" in page  # tau^(1/12) at the default costs


def test_a_matching_functional_raises_no_notice(lead, chapters_day):
    long_route(gate_functional="p_fully_supported")
    page = lead.get(f"{PAGE}?cutoffs=0.5").content.decode()
    assert "Long answers" in page and 'id="functional-mismatch"' not in page


def test_the_cost_calculator_reads_tau_against_each_harm_model(lead, chapters_day):
    long_route(expected_claims=12)
    page = lead.get(f"{PAGE}?tab=cost&c_w=20&c_a=0.5", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="cost").content.decode()
    assert 'id="long-thresholds"' in page
    assert "all_or_nothing (this route)" in page and "Pr(S = 1)" in page and "E[S]" in page
    assert "0.993843" in page


def test_a_short_route_shows_no_long_answer_panel(lead, chapters_day):
    page = lead.get(f"{PAGE}?cutoffs=0.5").content.decode()
    assert "Long answers" not in page and 'id="long-thresholds"' not in page


def test_the_csv_of_a_long_route_carries_its_columns(lead, chapters_day):
    long_route(harm_model="at_least", support_threshold=0.9)
    response = lead.get("/operating-points/table.csv?cutoffs=0.5")
    lines = response.content.decode().splitlines()
    header = lines[0].split(",")
    assert "expected_support" in header and "p_support_at_least_high" in header and "utility_per_1000" in header
    row = dict(zip(header, lines[2].split(","), strict=True))
    assert float(row["expected_support"]) == pytest.approx(0.95)
    assert float(row["p_fully_supported"]) == pytest.approx(189 / 350)
