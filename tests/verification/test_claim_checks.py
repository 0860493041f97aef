"""The span check of each claim of a long answer (issue 31): the claims the answering system sent
are the verifier's units, and the lookup API and the decision page give each claim's result."""

import pytest
from django.test import Client

from audit.services import Actor
from console.verification import services
from console.verification.models import DecisionSupport, SpanCheck
from tests.factories import ingest, long_record, make_user, record

PASSAGES = [
    {"id": "kb/mfa#2", "text": "To reset MFA, open Settings > Security and choose Reset.", "rank": 1},
    {"id": "kb/vpn#1", "text": "The VPN client is installed from the portal. Sign in with your badge.", "rank": 2},
]
CLAIMS = ["open Settings > Security and choose Reset.", "The VPN client is installed from the portal.", "Call 5."]


def _verify(ids: list[int]) -> None:
    services.decisions_verify(actor=Actor.system("tests"), decision_ids=ids)


@pytest.fixture
def long_decision(route) -> int:
    sent = long_record(CLAIMS, citations=[["kb/mfa#2"], ["kb/mfa#2"], []], passages=PASSAGES)
    [decision_id] = ingest([sent])
    return decision_id


def test_the_sent_claims_are_the_verifiers_units(long_decision):
    _verify([long_decision])
    support = DecisionSupport.objects.get(decision_id=long_decision)
    assert (support.units, support.units_supported) == (3, 2)
    assert support.expected_support == pytest.approx(2 / 3) and support.fully_supported is False
    found = SpanCheck.objects.filter(decision_id=long_decision, supported=True).values_list("unit_index", flat=True)
    assert set(found) == {0, 1}


def test_twelve_claims_of_which_eleven_are_found_give_the_chapters_mean_support(route):
    # Section 11.6: E[S] counts the share of supported claims; S = 1 needs every one of them.
    claims = [f"Step {n} is documented." for n in range(1, 13)]
    passage = {"id": "kb/steps", "text": " ".join(claims[:11]), "rank": 1}
    [decision_id] = ingest([long_record(claims, citations=[["kb/steps"]] * 12, passages=[passage])])
    _verify([decision_id])
    support = DecisionSupport.objects.get(decision_id=decision_id)
    assert support.expected_support == pytest.approx(11 / 12) and not support.fully_supported


def test_the_lookup_gives_each_claims_check_with_the_passages_it_cites(long_decision, reviewer):
    _verify([long_decision])
    body = reviewer.get(f"/api/v1/decisions/{long_decision}").json()
    assert body["claims"][2] == {"text": "Call 5.", "citations": []}
    assert body["claim_checks"] == [
        {
            "index": 0,
            "text": CLAIMS[0],
            "citations": ["kb/mfa#2"],
            "supported": True,
            "found_in": ["kb/mfa#2"],
            "cited_supported": True,
        },
        {
            "index": 1,
            "text": CLAIMS[1],
            "citations": ["kb/mfa#2"],
            "supported": True,
            "found_in": ["kb/vpn#1"],
            "cited_supported": False,
        },
        {"index": 2, "text": "Call 5.", "citations": [], "supported": False, "found_in": [], "cited_supported": None},
    ]


def test_before_verification_the_claims_are_listed_without_a_verdict(long_decision, reviewer):
    checks = reviewer.get(f"/api/v1/decisions/{long_decision}").json()["claim_checks"]
    assert [(c["index"], c["supported"], c["cited_supported"]) for c in checks] == [
        (0, None, None),
        (1, None, None),
        (2, None, None),
    ]


def test_a_short_decision_lists_its_claim_units_as_claims(route, reviewer):
    [decision_id] = ingest([record(claim="Open Settings. Choose Reset.", passages=PASSAGES)])
    _verify([decision_id])
    body = reviewer.get(f"/api/v1/decisions/{decision_id}").json()
    assert "claims" not in body and "functional" not in body["gate"]
    assert [(c["text"], c["supported"]) for c in body["claim_checks"]] == [
        ("Open Settings.", False),
        ("Choose Reset.", True),
    ]


def test_the_decision_page_shows_whether_each_claim_was_found_where_it_cites(long_decision, route):
    _verify([long_decision])
    client = Client()
    client.force_login(make_user("page-reviewer", "reviewer"))
    page = client.get(f"/decisions/{long_decision}/").content.decode()
    assert "as the answering system sent them" in page
    assert "found there" in page and "not found there" in page
