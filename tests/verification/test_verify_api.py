import pytest

from audit.models import AuditEvent
from tests.factories import ingest, make_token, make_user, record


def _passage_id(reviewer, decision_id: int, rank: int = 1) -> int:
    body = reviewer.get(f"/api/v1/decisions/{decision_id}").json()
    return next(p["passage_id"] for p in body["passages"] if p["rank"] == rank)


def _assert_ranges_slice_the_claim(text: str, claim: str, body: dict) -> None:
    data = text.encode("utf-8")
    for (start, end), (char_start, char_end) in zip(body["match_ranges"], body["char_ranges"], strict=True):
        assert data[start:end].decode("utf-8") == text[char_start:char_end]
        assert text[char_start:char_end].casefold() == claim.strip().casefold()


def test_verify_finds_a_claim_in_a_logged_passage(route, reviewer):
    [decision_id] = ingest([record()])
    passage_id = _passage_id(reviewer, decision_id)
    response = reviewer.post("/api/v1/verify", {"passage_id": passage_id, "claim": "  OPEN settings  "}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "supported": True,
        "decision": "supported",
        "match_ranges": [[14, 27]],
        "char_ranges": [[14, 27]],
        "truncated": False,
    }


def test_chunk_id_is_an_alias_of_passage_id(route, reviewer):
    [decision_id] = ingest([record()])
    passage_id = _passage_id(reviewer, decision_id, rank=2)
    response = reviewer.post("/api/v1/verify", {"chunk_id": passage_id, "claim": "reset MFA"}, format="json")
    assert response.json() == {
        "supported": False,
        "decision": "unsupported_claim",
        "match_ranges": [],
        "char_ranges": [],
        "truncated": False,
    }


@pytest.mark.parametrize(
    "text, claim",
    [
        ("İstanbul Kelvin", "kelvin"),
        ("\u212aelvin and kelvin", "KELVIN"),
        ("ẞtraße und STRASSE", "strasse"),
        ("Die Straße ist lang", "STRASSE"),
        ("İİİ i̇", "i̇"),
    ],
)
def test_offsets_point_into_the_original_text_when_folding_changes_length(route, reviewer, text, claim):
    body = reviewer.post("/api/v1/verify", {"text": text, "claim": claim}, format="json").json()
    assert body["supported"] is True
    _assert_ranges_slice_the_claim(text, claim, body)


def test_the_sharp_s_example_reports_byte_and_char_offsets(route, reviewer):
    # "ẞtraße" folds to "sstrasse": 6 characters, 9 bytes, 8 folded code points
    body = reviewer.post("/api/v1/verify", {"text": "ẞtraße", "claim": "SSTRASSE"}, format="json").json()
    assert body["char_ranges"] == [[0, 6]]
    assert body["match_ranges"] == [[0, len("ẞtraße".encode())]]


def test_at_most_100_ranges_are_returned_and_truncated_says_so(route, reviewer):
    body = reviewer.post("/api/v1/verify", {"text": "ab " * 150, "claim": "ab"}, format="json").json()
    assert len(body["match_ranges"]) == 100 and body["truncated"] is True


@pytest.mark.parametrize("claim, code", [("   ", "claim_empty"), ("", "claim_empty"), ("x" * 2001, "claim_too_long")])
def test_a_bad_claim_is_a_400_in_the_envelope(route, reviewer, claim, code):
    response = reviewer.post("/api/v1/verify", {"text": "some text", "claim": claim}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


def test_a_claim_of_exactly_2000_characters_is_allowed(route, reviewer):
    response = reviewer.post("/api/v1/verify", {"text": "x" * 2000, "claim": " " + "x" * 2000 + " "}, format="json")
    assert response.status_code == 200 and response.json()["supported"] is True


@pytest.mark.parametrize(
    "body",
    [
        {"claim": "x"},
        {"text": "a", "passage_id": 1, "claim": "x"},
        {"passage_id": 1, "chunk_id": 1, "claim": "x"},
        {"text": "a"},
        {"text": "a", "claim": 5},
        {"text": 5, "claim": "a"},
        {"text": "a", "claim": "a", "extra": 1},
        {"passage_id": "one", "claim": "x"},
        {"passage_id": 10**30, "claim": "x"},
        {"passage_id": True, "claim": "x"},
        [1, 2],
        "just a string",
    ],
)
def test_malformed_bodies_are_400_never_500(route, reviewer, body):
    response = reviewer.post("/api/v1/verify", body, format="json")
    assert response.status_code == 400
    assert "code" in response.json()["error"]


def test_an_unknown_passage_is_404_not_found(route, reviewer):
    response = reviewer.post("/api/v1/verify", {"passage_id": 987654321, "claim": "x"}, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_passage_of_another_route_is_404_for_its_owner(route, other_route, reviewer, anonymous):
    [decision_id] = ingest([record()])
    passage_id = _passage_id(reviewer, decision_id)
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {make_token(make_user('hr-lead', 'policy_owner', other_route))}")
    response = anonymous.post("/api/v1/verify", {"passage_id": passage_id, "claim": "reset"}, format="json")
    assert response.status_code == 404


def test_a_route_reader_verifies_their_routes_passage_and_not_the_same_passage_of_a_route_they_cannot_read(
    route, other_route, reviewer, anonymous
):
    [mine] = ingest([record()])
    [theirs] = ingest([record(route="hr-policy")])  # the same passages, logged by another route: rows of its own
    mine_id, theirs_id = _passage_id(reviewer, mine), _passage_id(reviewer, theirs)
    assert mine_id != theirs_id
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {make_token(make_user('it-reader', 'reader', route))}")
    assert anonymous.post("/api/v1/verify", {"passage_id": mine_id, "claim": "settings"}, format="json").json()[
        "supported"
    ]
    response = anonymous.post("/api/v1/verify", {"passage_id": theirs_id, "claim": "settings"}, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_grader_may_not_verify_a_logged_passage(route, reviewer, grader):
    [decision_id] = ingest([record()])
    passage_id = _passage_id(reviewer, decision_id)
    response = grader.post("/api/v1/verify", {"passage_id": passage_id, "claim": "reset"}, format="json")
    assert response.status_code == 403
    assert "supported" not in response.content.decode()


def test_any_signed_in_user_may_verify_their_own_text(route, grader, outsider):
    for client in (grader, outsider):
        response = client.post("/api/v1/verify", {"text": "Reset MFA here", "claim": "mfa"}, format="json")
        assert response.status_code == 200 and response.json()["supported"] is True


def test_verify_needs_authentication(anonymous, db):
    response = anonymous.post("/api/v1/verify", {"text": "a", "claim": "a"}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_verify_is_a_pure_read_with_no_audit_row(route, reviewer):
    [decision_id] = ingest([record()])
    passage_id = _passage_id(reviewer, decision_id)
    before = AuditEvent.objects.count()
    reviewer.post("/api/v1/verify", {"passage_id": passage_id, "claim": "reset"}, format="json")
    reviewer.post("/api/v1/verify", {"text": "a", "claim": "a"}, format="json")
    assert AuditEvent.objects.count() == before


def test_a_lone_surrogate_in_the_text_is_a_400(route, reviewer):
    response = reviewer.generic(
        "POST", "/api/v1/verify", '{"text": "a\\ud800b", "claim": "b"}', content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "text_not_utf8"


def test_the_schema_documents_verify(reviewer, db):
    schema = reviewer.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "/api/v1/verify" in schema and "chunk_id" in schema and "char_ranges" in schema


def test_a_text_over_a_million_characters_is_413_text_too_large(route, reviewer):
    response = reviewer.post("/api/v1/verify", {"text": "é" * 1_000_001, "claim": "é"}, format="json")
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "text_too_large"
    assert error["details"] == [
        {"field": "text", "code": "too_long", "message": "is too long", "max_chars": 1_000_000, "chars": 1_000_001}
    ]


def test_a_text_of_a_million_characters_is_searched(route, reviewer):
    response = reviewer.post("/api/v1/verify", {"text": "é" * 999_999 + "ß", "claim": "ÉSS"}, format="json")
    assert response.status_code == 200
    assert response.json()["char_ranges"] == [[999_998, 1_000_000]]


def test_a_search_past_the_time_budget_is_503_verify_time_budget(route, reviewer, settings):
    # The worst case of the issue: no ASCII anchor, a needle too long for the SIMD search, so
    # the linear search, which looks at the clock between chunks of the text it folds.
    settings.VERIFY_TIME_BUDGET_MS = 0
    text = ("Σ" * 1999 + "x") * 50
    response = reviewer.post("/api/v1/verify", {"text": text, "claim": "σ" * 2000}, format="json")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "verify_time_budget"
    settings.VERIFY_TIME_BUDGET_MS = 2_000
    response = reviewer.post("/api/v1/verify", {"text": text, "claim": "σ" * 1999}, format="json")
    assert response.status_code == 200
    assert len(response.json()["char_ranges"]) == 50
