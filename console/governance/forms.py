"""The draft form's fields, read into the same body the API takes (so one validator checks both),
and the prefill that the operating-points page's "Propose as policy" links carry."""

from __future__ import annotations

import json
import math
from typing import Any

from django.http import QueryDict

from console.analysis.params import FILTER_PREFIXES
from console.stats.policy_math import ExchangeRateBisection

NUMBERS = ("cutoff", "band_lower", "exchange_rate", "c_w", "c_a", "q", "c_v", "confidence", "alpha", "delta")
TEXTS = (
    "owner",
    "rationale",
    "escalation_contact",
    "escalation_channel",
    "escalation_response_hours",
    "refusal_message",
    "interval",
    "from",
    "to",
    "answers",
    "exchange_answers",
)


# The API's field names as the form's labels call them, so an error names the box to fix.
FIELD_LABELS = {
    "cutoff": "Cutoff",
    "band_lower": "Middle band from",
    "exchange_rate": "Exchange rate accepted",
    "exchange_answers": "Exchange-rate answers",
    "costs": "Costs",
    "owner": "Owner",
    "rationale": "Rationale",
    "refusal_message": "Refusal message",
    "escalation": "Escalation",
    "escalation.contact": "Escalation contact",
    "escalation.channel": "Escalation channel",
    "escalation.response_hours": "Response time in hours",
}


def labelled_errors(errors: list[dict]) -> list[dict]:
    """The validator's errors with each field named by its label on the form."""
    return [{**error, "field": FIELD_LABELS.get(error.get("field", ""), error.get("field", ""))} for error in errors]


def _number(raw: str | None) -> Any:
    """A float, None for an empty box, or the raw text (the validator then says "must be a number")."""
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        return raw
    return value if math.isfinite(value) else raw


def filter_items(params: QueryDict) -> list[tuple[str, str]]:
    """The window filters among the parameters, kept as hidden fields of the form."""
    items = [(name, params[name]) for name in ("from", "to") if params.get(name)]
    items += [(name, params[name]) for name in sorted(params) if name.startswith(FILTER_PREFIXES) and params[name]]
    return items


def answers_from(params: QueryDict) -> list[dict[str, Any]]:
    """Exchange-rate answers from ``exchange_answers`` (JSON) or the analysis page's ``answers`` (y/n)."""
    raw = params.get("exchange_answers")
    if raw:
        try:
            answers = json.loads(raw)
        except ValueError:
            return []
        return answers if isinstance(answers, list) else []
    letters = params.get("answers", "")
    if not letters or not all(a in "yn" for a in letters) or len(letters) > ExchangeRateBisection().max_answers:
        return []
    state = ExchangeRateBisection.replay([a == "y" for a in letters])
    return [{"rate": rate, "accept": accepted} for rate, accepted in state.answers]


def params_from_policy(policy: Any, params: QueryDict) -> QueryDict:
    """A new draft starts from the version in force: its numbers, owner, escalation path and refusal
    message, under whatever the link itself carries. The rationale starts empty, since a new
    version needs its own reason."""
    start = QueryDict(mutable=True)
    numbers = {"cutoff": policy.cutoff, "band_lower": policy.band_lower, "exchange_rate": policy.exchange_rate}
    numbers |= {key: value for key, value in (policy.costs or {}).items() if key in NUMBERS}
    for name, value in numbers.items():
        if value is not None:
            start[name] = f"{value:g}"
    start["owner"] = policy.owner.get_username()
    start["escalation_contact"] = policy.escalation_contact
    start["escalation_channel"] = policy.escalation_channel
    start["escalation_response_hours"] = str(policy.escalation_response_hours)
    start["refusal_message"] = policy.refusal_message
    for name in params:
        start.setlist(name, params.getlist(name))
    return start


def initial_values(params: QueryDict) -> dict[str, Any]:
    """The form's boxes, prefilled from the query string of a "Propose as policy" link."""
    values = {name: params.get(name, "") for name in NUMBERS + TEXTS}
    answers = answers_from(params)
    values["exchange_answers"] = json.dumps(answers) if answers else ""
    if not values["exchange_rate"] and params.get("answers"):
        state = ExchangeRateBisection.replay([a == "y" for a in params.get("answers", "") if a in "yn"])
        if state.done and state.r_star:
            values["exchange_rate"] = f"{state.r_star:.3g}"
    return values


def draft_body(post: QueryDict) -> dict[str, Any]:
    """The API's draft body from the form's fields."""
    costs = {key: _number(post.get(key)) for key in ("c_w", "c_a", "q", "c_v")}
    costs = {key: value for key, value in costs.items() if value is not None}
    hours_raw = (post.get("escalation_response_hours") or "").strip()
    hours: Any = int(hours_raw) if hours_raw.isdigit() else (hours_raw or None)
    filters = {
        "from": post.get("from") or None,
        "to": post.get("to") or None,
        "versions": {name.removeprefix("version."): post[name] for name in post if name.startswith("version.")},
        "segments": {name.removeprefix("segment."): post[name] for name in post if name.startswith("segment.")},
    }
    body: dict[str, Any] = {
        "cutoff": _number(post.get("cutoff")),
        "band_lower": _number(post.get("band_lower")),
        "exchange_rate": _number(post.get("exchange_rate")),
        "exchange_answers": answers_from(post),
        "costs": costs or None,
        "owner": post.get("owner") or None,
        "rationale": post.get("rationale") or None,
        "refusal_message": post.get("refusal_message") or None,
        "escalation": {
            "contact": post.get("escalation_contact") or None,
            "channel": post.get("escalation_channel") or None,
            "response_hours": hours,
        },
        "filters": filters,
    }
    for name in ("confidence", "interval"):
        if post.get(name):
            body[name] = _number(post[name]) if name == "confidence" else post[name]
    if post.get("alpha"):
        body["certification"] = {"alpha": _number(post["alpha"])} | (
            {"delta": _number(post["delta"])} if post.get("delta") else {}
        )
    return body
