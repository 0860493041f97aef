"""Property: whatever JSON value a client puts into a number or free-text field of an audited API,
the API answers it without a 5xx and the audit chain still verifies afterwards.

The values are arbitrary JSON (and what is not quite JSON: NaN, Infinity, numbers past a double, lone
surrogates, NUL), with the numbers PostgreSQL's jsonb writes back in another form mixed in on purpose.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests import factories
from tests.disputes.conftest import PASSAGES, REFUSED_SCORE
from tests.governance.conftest import client_for, draft_body
from tests.grading.helpers import pooled

pytestmark = pytest.mark.slow

_AWKWARD_NUMBERS = [1e16, -0.0, 1e308, 5e-324, 2**53 + 1, -(2**63), 10**40, 0.1 + 0.2, 1.0, float("nan"), float("inf")]
_AWKWARD_TEXT = ["\x00", "a\x00b", "\ud800", "x\udfffy", "\U0001f600", "\U000e0001", "\u2028", "e\u0301", "\\u0000", ""]

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats()  # NaN and infinities included: they must be refused, not stored
    | st.sampled_from(_AWKWARD_NUMBERS)
    | st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
    | st.sampled_from(_AWKWARD_TEXT)
)
json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=6,
)


def _set(body: dict, path: str, value: Any) -> dict:
    body = copy.deepcopy(body)
    *parents, last = path.split(".")
    target: Any = body
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
    return body


def _raw(client, method: str, url: str, body: Any):
    # json.dumps writes NaN and Infinity as such and lone surrogates as \u escapes: what a hostile client sends.
    text = json.dumps(body)
    return client.generic(method, url, text.encode(), content_type="application/json")


DRAFT_FIELDS = [
    "cutoff",
    "band_lower",
    "exchange_rate",
    "confidence",
    "rationale",
    "refusal_message",
    "owner",
    "costs",
    "costs.c_w",
    "costs.q",
    "exchange_answers",
    "exchange_answers.0.rate",
    "escalation.contact",
    "escalation.channel",
    "escalation.response_hours",
    "filters",
    "interval",
]
DISPUTE_FIELDS = ["reason", "evidence.quote", "contact", "kind"]
INGEST_FIELDS = ["question", "claim", "gate.score", "segments.language", "passages.0.text", "passages.0.rank"]


@pytest.fixture
def world(route, reviewer, owner, auditor, integrator):
    """Clients and decisions for every audited API under test, with a counter per consumable."""
    refused = factories.ingest(
        [
            factories.record(passages=PASSAGES, gate={"name": "nli", "score": REFUSED_SCORE, "cutoff": 0.85})
            for _ in range(40)
        ]
    )
    pooled([factories.served_record(occurred_at=factories.recent()) for _ in range(40)])
    return {
        "reviewer": reviewer,
        "auditor": auditor,
        "integrator": integrator,
        "reader": client_for(factories.make_user("agent", "reader", route)),
        "grader": client_for(factories.make_user("grader-1", "grader", route)),
        "refused": itertools.cycle(refused),
    }


def _draft(world, path: str, value: Any):
    return _raw(world["reviewer"], "POST", "/api/v1/routes/it-support/policies", _set(draft_body(), path, value))


def _dispute(world, path: str, value: Any):
    decision_id = next(world["refused"])
    body = {"kind": "other", "reason": "The passage answers it.", "evidence": {"url": "https://kb", "quote": "Reset"}}
    return _raw(world["reader"], "POST", f"/api/v1/decisions/{decision_id}/disputes", _set(body, path, value))


def _grade_note(world, path: str, value: Any):
    grader = world["grader"]
    item = grader.post("/api/v1/grading/next", {"route": "it-support"}, format="json")
    assert item.status_code in (200, 204), item.content[:300]
    if item.status_code == 204:
        return item
    url = f"/api/v1/grading/items/{item.json()['item']['id']}/grades"
    return _raw(grader, "POST", url, {"verdict": "correct", "note": value})


def _ingest(world, path: str, value: Any):
    body = {"decisions": [_set(factories.record(), path, value)]}
    return _raw(world["integrator"], "POST", "/api/v1/decisions", body)


def _labels(world, path: str, value: Any):
    row = {"route": "it-support", "request_id": "q-none", "verdict": "correct", "source": "legacy"}
    return _raw(world["integrator"], "POST", "/api/v1/labels", {"labels": [_set(row, path, value)]})


def _trial(world, path: str, value: Any):
    body = {"name": "reference", "kind": "reference", "repeats": 1}
    return _raw(world["reviewer"], "POST", "/api/v1/routes/it-support/gate-trials", _set(body, path, value))


TARGETS: list[tuple[Callable, str]] = (
    [(_draft, f) for f in DRAFT_FIELDS]
    + [(_dispute, f) for f in DISPUTE_FIELDS]
    + [(_grade_note, "note")]
    + [(_ingest, f) for f in INGEST_FIELDS]
    + [(_labels, f) for f in ("source", "verdict")]
    + [(_trial, f) for f in ("name", "repeats", "timeout_s")]
)


def test_no_value_in_an_audited_field_answers_5xx_or_breaks_the_chain(world):
    accepted = []

    # derandomize: the same 60 values every run, so CI cannot pass or fail by the draw; widen the
    # search by hand with --hypothesis-seed and derandomize off when changing an audited API.
    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(target=st.sampled_from(TARGETS), value=json_values)
    @example(target=(_draft, "cutoff"), value=1e16)  # the reported reproduction
    @example(target=(_draft, "costs.c_w"), value=-0.0)
    @example(target=(_dispute, "reason"), value="\U0001f600 \U000e0001 e\u0301 \u2028")
    @example(target=(_grade_note, "note"), value="1e16")
    def sent(target, value):
        call, path = target
        response = call(world, path, value)
        assert response.status_code < 500, (call.__name__, path, value, response.content[:300])
        if response.status_code < 300:
            accepted.append((call.__name__, path))
        verify = world["auditor"].get("/api/v1/audit/verify").json()
        assert verify["ok"] is True, (call.__name__, path, value, verify)

    sent()
    assert accepted, "no value was accepted: the property was only ever checked against refusals"


def test_each_awkward_number_in_each_numeric_draft_field_is_stored_and_keeps_the_chain(reviewer, owner, auditor):
    world = {"reviewer": reviewer}
    for path in ("cutoff", "costs.c_w", "exchange_answers.0.rate", "exchange_rate"):
        for number in (1e16, -0.0, 1e308, 5e-324, 2**53 + 1, 10**30):
            response = _draft(world, path, number)
            assert response.status_code < 500, (path, number, response.content[:300])
            verify = auditor.get("/api/v1/audit/verify").json()
            assert verify["ok"] is True, (path, number, verify)
    # Not only refusals: the hostile cutoffs were drafted, and their events are in the chain.
    assert _draft(world, "cutoff", 1e16).status_code == 201
