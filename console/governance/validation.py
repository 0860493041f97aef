"""Checking a draft as the API and the draft form send it: every problem is reported at once, one
detail per field (``{"field", "message"}``), so a client fixes a whole draft in one go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model

from console.accounts import permissions
from console.accounts.models import Route
from console.analysis.params import (
    CertifiedCutoffQuery,
    OperatingPointsQuery,
    certified_cutoff_query,
    operating_points_query,
)
from console.core.errors import InvalidInput, detail
from console.core.validation import FieldErrors, number_field, text_field
from console.governance.escalation import CHANNEL_FORMS, is_escalation_channel
from console.governance.models import MAX_RESPONSE_HOURS
from console.stats.policy_math import citation_adjusted_cost, cost_threshold

MAX_TEXT = 20_000
MAX_ANSWERS = 20
# The top-level fields of a draft's body (parse_draft reads these and no others).
DRAFT_FIELDS = frozenset(
    {
        "cutoff",
        "band_lower",
        "exchange_rate",
        "exchange_answers",
        "costs",
        "owner",
        "rationale",
        "refusal_message",
        "escalation",
        "filters",
        "confidence",
        "interval",
        "trial",
        "certification",
    }
)


@dataclass(frozen=True)
class DraftInput:
    cutoff: float
    band_lower: float | None
    exchange_rate: float | None
    exchange_answers: list[dict[str, Any]]
    costs: dict[str, float] | None
    cost_threshold: float | None
    owner: Any
    rationale: str
    escalation_contact: str
    escalation_channel: str
    escalation_response_hours: int
    refusal_message: str
    query: OperatingPointsQuery
    certification: CertifiedCutoffQuery | None
    trial: Any = None  # a passed candidate gate trial of the route, attached as evidence


def _trial(errors: FieldErrors, raw: Any, route: Route):
    """A finished, passed trial of this route, or None when none is attached."""
    from console.trials.models import Trial, TrialStatus

    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        errors.add(0, "trial", "must be the id of a candidate gate trial")
        return None
    trial = Trial.objects.filter(pk=raw, route=route).first()
    if trial is None:
        errors.add(0, "trial", f"no trial {raw} on this route")
    elif trial.status != TrialStatus.DONE or not trial.passed:
        errors.add(0, "trial", f"trial {raw} has not passed its promotion gates; only a passed trial is evidence")
    else:
        return trial
    return None


def _costs(errors: FieldErrors, raw: Any) -> tuple[dict[str, float] | None, float | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        errors.add(0, "costs", "must be an object with c_w, c_a and optionally q and c_v")
        return None, None
    unknown = set(raw) - {"c_w", "c_a", "q", "c_v"}
    if unknown:
        errors.add(0, "costs", f"has unknown keys: {', '.join(sorted(unknown))}")
    values = {
        key: number_field(errors, 0, f"costs.{key}", raw.get(key), required=key in ("c_w", "c_a"))
        for key in ("c_w", "c_a", "q", "c_v")
    }
    costs = {key: value for key, value in values.items() if value is not None}
    if any(costs.get(key, 0) < 0 for key in ("c_w", "c_a", "c_v")):
        errors.add(0, "costs", "c_w, c_a and c_v must not be negative")
        return None, None
    if "q" in costs and not 0 <= costs["q"] <= 1:
        errors.add(0, "costs.q", "must lie in [0, 1]")
        return None, None
    if "q" in costs and "c_v" not in costs:
        errors.add(0, "costs.c_v", "is required with q")
        return None, None
    if "c_w" not in costs or "c_a" not in costs:
        return None, None
    c_w = citation_adjusted_cost(costs["c_w"], costs["c_v"], costs["q"]) if "q" in costs else costs["c_w"]
    try:
        return costs, cost_threshold(c_w, costs["c_a"])
    except ValueError as exc:  # costs under which a gate never pays (c_w <= c_a): the owner's input, a 400
        errors.add(0, "costs", str(exc))
        return None, None


def _answers(errors: FieldErrors, raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_ANSWERS:
        errors.add(0, "exchange_answers", f"must be a list of at most {MAX_ANSWERS} {{rate, accept}} objects")
        return []
    answers = []
    for i, answer in enumerate(raw):
        if (
            not isinstance(answer, dict)
            or set(answer) != {"rate", "accept"}
            or not isinstance(answer["accept"], bool)
            or isinstance(answer["rate"], bool)
            or not isinstance(answer["rate"], int | float)
            or not answer["rate"] > 0
        ):
            errors.add(0, f"exchange_answers[{i}]", 'must be {"rate": a positive number, "accept": true or false}')
        else:
            answers.append({"rate": answer["rate"], "accept": answer["accept"]})
    return answers


def _owner(errors: FieldErrors, raw: Any, route: Route):
    username = text_field(errors, 0, "owner", raw, max_len=150)
    if username is None:
        return None
    owner = get_user_model().objects.filter(username=username, is_active=True).first()
    if owner is None or not permissions.holds_policy_owner(owner, route):
        errors.add(0, "owner", f"must name a user who holds policy_owner on route {route.slug}")
        return None
    return owner


def _filter_params(errors: FieldErrors, data: dict[str, Any]) -> dict[str, str]:
    """The draft's ``filters``, ``confidence`` and ``interval`` as the operating-points parameters."""
    params: dict[str, str] = {}
    filters = data.get("filters")
    filters = {} if filters is None else filters  # [] or "" is refused below, not read as no filters
    if not isinstance(filters, dict):
        errors.add(0, "filters", "must be an object")
        filters = {}
    unknown = set(filters) - {"from", "to", "model", "segment", "versions", "segments"}
    if unknown:
        errors.add(0, "filters", f"has unknown keys: {', '.join(sorted(map(str, unknown)))}")
    for name in ("from", "to"):
        if filters.get(name):
            params[name] = str(filters[name])
    if filters.get("model"):
        params["version.model"] = str(filters["model"])
    segment = filters.get("segment")
    if isinstance(segment, str) and segment:  # "language=de", as the operating-points page writes it
        key, _, value = segment.partition("=")
        params[f"segment.{key.strip()}"] = value.strip()
    elif isinstance(segment, dict):
        filters = filters | {"segments": (filters.get("segments") or {}) | segment}
    for kind, prefix in (("versions", "version."), ("segments", "segment.")):
        pairs = filters.get(kind) or {}
        if not isinstance(pairs, dict):
            errors.add(0, f"filters.{kind}", "must be an object of key: value")
            continue
        for key, value in pairs.items():
            params[prefix + str(key)] = str(value)
    for name in ("confidence", "interval"):
        if data.get(name) is not None:
            params[name] = str(data[name])
    return params


def parse_draft(data: Any, *, route: Route) -> DraftInput:
    """A draft from its JSON body; InvalidInput (400) with one detail per problem."""
    if not isinstance(data, dict):
        raise InvalidInput(
            "The body must be a JSON object.", details=[detail(None, "invalid_body", "must be an object")]
        )
    errors = FieldErrors()
    cutoff = number_field(errors, 0, "cutoff", data.get("cutoff"))
    band_lower = number_field(errors, 0, "band_lower", data.get("band_lower"), required=False)
    if cutoff is not None and band_lower is not None and band_lower > cutoff:
        errors.add(0, "band_lower", "must not be above the cutoff")
    exchange_rate = number_field(errors, 0, "exchange_rate", data.get("exchange_rate"), required=False)
    if exchange_rate is not None and exchange_rate <= 0:
        errors.add(0, "exchange_rate", "must be positive")
    answers = _answers(errors, data.get("exchange_answers"))
    costs, tau = _costs(errors, data.get("costs"))
    owner = _owner(errors, data.get("owner"), route)
    rationale = text_field(errors, 0, "rationale", data.get("rationale"), max_len=MAX_TEXT)
    refusal_message = text_field(errors, 0, "refusal_message", data.get("refusal_message"), max_len=MAX_TEXT)
    escalation = data.get("escalation")
    if escalation is None:
        escalation = {}
    if not isinstance(escalation, dict):
        errors.add(0, "escalation", "must be an object with contact, channel and response_hours")
        escalation = {}
    contact = text_field(errors, 0, "escalation.contact", escalation.get("contact"), max_len=200)
    channel = text_field(errors, 0, "escalation.channel", escalation.get("channel"), max_len=500)
    if channel is not None and not is_escalation_channel(channel):
        errors.add(0, "escalation.channel", CHANNEL_FORMS, "invalid_channel")
        channel = None
    hours = escalation.get("response_hours")
    if hours is None:
        errors.add(0, "escalation.response_hours", "is required")
    elif isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= MAX_RESPONSE_HOURS:
        errors.add(0, "escalation.response_hours", f"must be a whole number of hours from 1 to {MAX_RESPONSE_HOURS}")
        hours = None
    query = certification = None
    params = _filter_params(errors, data)
    try:
        query = operating_points_query(params)
    except InvalidInput as exc:
        for problem in exc.details:
            errors.add(0, "filters", problem["message"], problem.get("code", "invalid"))
    trial = _trial(errors, data.get("trial"), route)
    raw_certification = data.get("certification")
    if raw_certification is not None:
        if not isinstance(raw_certification, dict) or set(raw_certification) - {"alpha", "delta"}:
            errors.add(0, "certification", "must be an object with alpha and optionally delta")
        else:
            window_params = {k: v for k, v in params.items() if k not in ("confidence", "interval")}
            try:
                certification = certified_cutoff_query(
                    window_params | {key: str(value) for key, value in raw_certification.items()}
                )
            except InvalidInput as exc:
                for problem in exc.details:
                    errors.add(0, "certification", problem["message"], problem.get("code", "invalid"))
    if errors.items:
        details = errors.of_one_body()
        fields = ", ".join(dict.fromkeys(d["field"] or "body" for d in details))
        raise InvalidInput(f"The draft is incomplete or invalid: {fields}.", details=details)
    return DraftInput(
        cutoff=cutoff,
        band_lower=band_lower,
        exchange_rate=exchange_rate,
        exchange_answers=answers,
        costs=costs,
        cost_threshold=tau,
        owner=owner,
        rationale=rationale,
        escalation_contact=contact,
        escalation_channel=channel,
        escalation_response_hours=hours,
        refusal_message=refusal_message,
        query=query,
        certification=certification,
        trial=trial,
    )
