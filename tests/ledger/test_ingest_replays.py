"""A decision re-sent with its request_id is a no-op when its content is the same by value (another
JSON library may spell 3 as 3.0), and a 409 when it is not; and a route a token may not ingest
into answers exactly as a route that does not exist."""

from __future__ import annotations

import copy

import pytest

from console.ledger.models import Decision
from console.ledger.validation import content_hash, validate_batch
from tests.factories import make_route, make_token, make_user, record

INGEST = "/api/v1/decisions"


def post(client, records):
    return client.post(INGEST, {"decisions": records}, format="json")


def as_floats(sent: dict) -> dict:
    """The same decision as a JSON library that writes every number as a float would send it."""
    again = copy.deepcopy(sent)
    again["segments"] = {
        k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in sent["segments"].items()
    }
    again["gate"] = {k: float(v) if isinstance(v, int) else v for k, v in sent["gate"].items()}
    for position, passage in enumerate(again["passages"], start=1):
        passage["rank"] = float(position)
        passage["retrieval_score"] = float(passage.get("retrieval_score") or 1)
    return again


def with_whole_numbers(**overrides) -> dict:
    sent = record(segments={"language": "en", "turn": 3, "tier": 2, "vip": True}, **overrides)
    sent["gate"] = {"name": "g", "score": 1, "cutoff": 0}
    for position, passage in enumerate(sent["passages"], start=1):
        passage["rank"] = position
        passage["retrieval_score"] = 1
    return sent


def test_a_retry_spelling_whole_numbers_as_floats_is_unchanged(integrator):
    sent = with_whole_numbers()
    assert post(integrator, [sent]).json() == {"created": 1, "unchanged": 0}
    response = post(integrator, [as_floats(sent)])
    assert response.status_code == 201, response.content
    assert response.json() == {"created": 0, "unchanged": 1}
    assert Decision.objects.count() == 1


def test_the_same_decision_twice_in_one_batch_with_3_and_3_0_is_one_decision(integrator):
    sent = with_whole_numbers()
    assert post(integrator, [sent, as_floats(sent)]).json() == {"created": 1, "unchanged": 1}


def test_a_retry_with_another_segment_value_is_still_a_409(integrator):
    sent = with_whole_numbers()
    post(integrator, [sent])
    changed = as_floats(sent)
    changed["segments"]["turn"] = 3.5
    response = post(integrator, [changed])
    assert response.status_code == 409
    [detail] = response.json()["error"]["details"]
    assert detail["index"] == 0 and detail["field"] == "request_id" and detail["request_id"] == sent["request_id"]


def test_true_is_not_the_number_one(integrator):
    sent = record(segments={"flag": True})
    post(integrator, [sent])
    assert post(integrator, [{**sent, "segments": {"flag": 1}}]).status_code == 409


@pytest.mark.parametrize("resent", [3, 3.0])
def test_a_decision_hashed_before_numbers_were_canonical_still_repeats_as_unchanged(integrator, resent):
    """Stored hashes are not rewritten: a decision stored with `3.0` kept the hash of that spelling."""
    sent = record(segments={"turn": 3.0})
    post(integrator, [sent])
    [item], _ = validate_batch([sent])
    Decision.objects.filter(request_id=sent["request_id"]).update(content_hash=content_hash(item, {"turn": 3.0}))
    response = post(integrator, [{**sent, "segments": {"turn": resent}}])
    assert response.status_code == 201 and response.json() == {"created": 0, "unchanged": 1}
    assert post(integrator, [{**sent, "segments": {"turn": 4}}]).status_code == 409


def _same_answer(one, other, *, slugs: tuple[str, str]) -> None:
    assert (one.status_code, one["Content-Type"]) == (other.status_code, other["Content-Type"])
    first, second = one.json(), other.json()
    assert first == _renamed(second, *slugs)


def _renamed(body, old: str, new: str):
    """The body with one route slug written as another: the only difference the answers may show."""
    if isinstance(body, dict):
        return {k: _renamed(v, old, new) for k, v in body.items()}
    if isinstance(body, list):
        return [_renamed(v, old, new) for v in body]
    return body.replace(old, new) if isinstance(body, str) else body


def test_a_single_route_token_cannot_tell_another_route_from_no_route(route, other_route, anonymous):
    anonymous.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(make_user('hr-only', 'integrator', other_route))}")
    existing = post(anonymous, [record(route="it-support", request_id="same")])
    missing = post(anonymous, [record(route="no-such-route", request_id="same")])
    assert existing.status_code == 400 and existing.json()["error"]["code"] == "unknown_route"
    _same_answer(existing, missing, slugs=("no-such-route", "it-support"))
    assert not Decision.objects.exists()


def test_a_grader_cannot_tell_a_route_from_no_route(route, grader):
    existing = post(grader, [record(route="it-support", request_id="same")])
    missing = post(grader, [record(route="no-such-route", request_id="same")])
    assert existing.status_code == 403 and existing.json()["error"]["code"] == "forbidden"
    assert existing.json() == missing.json()


def test_a_scoped_token_naming_its_own_and_a_hidden_route_learns_only_about_the_hidden_one_being_unknown(
    route, other_route, anonymous
):
    make_route("finance")
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {make_token(make_user('hr-only', 'integrator', other_route))}")
    response = post(anonymous, [record(route="hr-policy"), record(route="finance")])
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "unknown_route"
    assert [(d["index"], d["field"], d["code"]) for d in error["details"]] == [(1, "route", "unknown_route")]
