"""Calling a candidate gate: the request body, the reply's contract, and the built-in reference rule.

Contract: the console POSTs ``{"request_id", "question", "passages": [{"id", "text"}],
"draft_answer"}`` (the decision's logged passages in rank order, exactly; the draft is the answer
under review, i.e. the grading item's answer) and reads ``{"verdict": "answer" | "answer_partially"
| "surface_conflict" | "abstain", "score": optional number, "citations": optional list of passage
ids}``. Anything else is a failed call (`CallFailed`), never an abstention: a timeout, a refused
connection, a destination the egress policy refuses, an HTTP error, a redirect, a body over the
size limit, malformed JSON, a missing or unknown verdict, a score that
is not a finite number, citations that are not a list of strings, and citations naming a passage
that was not sent (`CitationError`, counted as citation errors too). A call is made once: no retry,
so that the trial never asks twice for the same (item, repeat). Calls go through the console's one
outbound client (`console.core.outbound`).

The reference candidate ("kind": "reference") is evaluated in process through the same reply
check: it splits the draft into claim units like the span verifier and finds each in the passages;
every unit found -> ``answer``, some -> ``answer_partially``, none (or no draft) -> ``abstain``;
its citations are the passages in which a unit was found and its score the share of units found.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from console.core import outbound
from console.stats.trials import VERDICTS
from console.verification.spans import ClaimTooLong, TextNotUtf8, TimeBudgetExceeded, split_claim_units, verify_span

HEADER_ENV_PREFIX = "CANDIDATE_HEADER_"

logger = logging.getLogger(__name__)


class CallFailed(Exception):
    """The call gave no usable verdict; the message says why and is kept on the call."""


class CitationError(CallFailed):
    """The reply cited a passage id the console did not send."""


@dataclass(frozen=True)
class CandidateReply:
    verdict: str
    score: float | None
    citations: list[str]


@dataclass(frozen=True)
class CallRequest:
    request_id: str
    question: str
    passages: list[dict[str, str]]  # [{"id", "text"}] in rank order
    draft_answer: str

    def payload(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "question": self.question,
            "passages": self.passages,
            "draft_answer": self.draft_answer,
        }


# ---------------------------------------------------------------------------------------------
# Headers at rest


def _fernet() -> Fernet:
    # A key of its own, derived from SECRET_KEY: rotating the secret key makes stored headers
    # unreadable (calls then fail with a message saying so) rather than readable by a guess.
    digest = hashlib.sha256(f"trials-candidate-headers:{settings.SECRET_KEY}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def headers_encrypt(headers: dict[str, str]) -> str:
    return _fernet().encrypt(json.dumps(headers, sort_keys=True).encode()).decode() if headers else ""


def headers_decrypt(token: str) -> dict[str, str]:
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode()).decode())
    except InvalidToken:
        raise CallFailed(
            "The stored headers cannot be decrypted (was SECRET_KEY changed?); register the candidate again."
        ) from None


def headers_from_env(name: str) -> dict[str, str]:
    """The header an environment variable named ``CANDIDATE_HEADER_<NAME>`` holds as "Name: value".

    Only that prefix is read: whoever may start a trial names the variable and the URL the header
    goes to, so any other name (``DATABASE_URL``, ``SECRET_KEY``) would send a secret to them."""
    if not name:
        return {}
    if not name.startswith(HEADER_ENV_PREFIX) or len(name) == len(HEADER_ENV_PREFIX):
        raise CallFailed(f"Headers come only from environment variables named {HEADER_ENV_PREFIX}<NAME>; not {name}.")
    value = os.environ.get(name, "")
    header, _, content = value.partition(":")
    if not header.strip() or not content.strip():
        raise CallFailed(f'The environment variable {name} is not set to "Header-Name: value".')
    return {header.strip(): content.strip()}


# ---------------------------------------------------------------------------------------------
# The reply


def reply_from(raw: bytes, sent_ids: set[str]) -> CandidateReply:
    """The candidate's reply checked against the contract, or CallFailed / CitationError."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise CallFailed(f"The reply is not JSON ({len(raw):,} bytes).") from None
    if not isinstance(data, dict):
        raise CallFailed(f"The reply is JSON but not an object (a {_kind(data)}).")
    verdict = data.get("verdict")
    if not isinstance(verdict, str) or verdict not in VERDICTS:
        raise CallFailed(f'"verdict" must be one of {", ".join(sorted(VERDICTS))}; got {_shape(verdict)}.')
    score = data.get("score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise CallFailed(f'"score" must be a finite number; got {_shape(score)}.')
        score = float(score)
    citations = data.get("citations")
    if citations is None:
        citations = []
    if not isinstance(citations, list) or not all(isinstance(c, str) for c in citations):
        raise CallFailed(f'"citations" must be a list of passage ids (strings); got {_shape(citations)}.')
    unknown = sorted(set(citations) - sent_ids)
    if unknown:
        raise CitationError(
            f"Cited passages that were not sent: {', '.join(repr(u) for u in unknown[:5])}"
            + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            + "."
        )
    return CandidateReply(verdict, score, citations)


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _shape(value: Any) -> str:
    """What a wrong value was, never what it said: the reply comes from a URL a reviewer chose, and
    its text shown on the trial page would make the console a reader of whatever answers there."""
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"a string of {len(value):,} characters"
    if isinstance(value, list | dict):
        return f"a {_kind(value)} of {len(value):,} items"
    return f"a {_kind(value)}"


# ---------------------------------------------------------------------------------------------
# Calling


def call_http(request: CallRequest, *, url: str, headers: dict[str, str], timeout_s: float) -> CandidateReply:
    """One POST through the outbound client, `timeout_s` for the whole call and no retry, not
    even after a failure to connect: `calls_mark_lost` counts on a call ending within `timeout_s`."""
    body = json.dumps(request.payload(), ensure_ascii=False).encode("utf-8")
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        **headers,
        "User-Agent": "abstention-review-console/trials",
    }
    try:
        response = outbound.post(
            url, body, headers=sent, target="the candidate", timeout=timeout_s, retry=outbound.NO_RETRY
        )
    except outbound.OutboundError as exc:
        logger.info("candidate call to %s failed: %s", url, exc)
        raise CallFailed(outbound.public_reason(exc, "the candidate")) from None
    return reply_from(response.body, {p["id"] for p in request.passages})


def reference_reply(request: CallRequest) -> dict[str, Any]:
    """The built-in rule on the span verifier's support (see the module docstring)."""
    units = split_claim_units(request.draft_answer or "")
    if not units:
        return {"verdict": "abstain", "score": 0.0, "citations": []}
    cited: list[str] = []
    found = 0
    for unit in units:
        hits = [p["id"] for p in request.passages if _found(p["text"], unit)]
        found += bool(hits)
        cited.extend(h for h in hits if h not in cited)
    verdict = "answer" if found == len(units) else "answer_partially" if found else "abstain"
    return {"verdict": verdict, "score": found / len(units), "citations": cited}


def call_reference(request: CallRequest) -> CandidateReply:
    raw = json.dumps(reference_reply(request)).encode("utf-8")
    return reply_from(raw, {p["id"] for p in request.passages})


def _found(text: str, unit: str) -> bool:
    try:
        return verify_span(text, unit).supported
    except (ClaimTooLong, TextNotUtf8, TimeBudgetExceeded):  # unsearchable counts as not found, as in verification
        return False
