"""The body of `POST /api/v1/routes/{slug}/gate-trials` (and of the page's form) checked whole:
InvalidInput lists every bad field."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from console.analysis.params import Window
from console.core.errors import InvalidInput, detail
from console.shadow.pipelines import validate_pipeline_url
from console.trials.models import CandidateKind

DEFAULT_GATES: dict[str, float | None] = {
    "max_unsafe_upper": 0.05,
    "min_coverage": None,
    "min_stability": 0.9,
    "max_citation_errors": 0,
}
# What each promotion gate asks, in the words the trial page shows (the keys are the API's names).
GATE_LABELS: dict[str, str] = {
    "max_unsafe_upper": "Wrong answers served: upper bound at most",
    "min_coverage": "Questions answered: at least",
    "min_stability": "Same verdict on repeated calls: at least",
    "max_citation_errors": "Citation errors: at most",
}
_HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,100}$")
_ENV_NAME = re.compile(r"^CANDIDATE_HEADER_[A-Z0-9_]{1,83}$")  # candidates.HEADER_ENV_PREFIX, then a name
_MAX_HEADER_VALUE = 4_000


@dataclass(frozen=True)
class TrialSpec:
    name: str
    kind: str
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    headers_env: str = ""
    timeout_s: float = 10.0
    repeats: int = 3
    subset: dict[str, Any] = field(default_factory=dict)
    gates: dict[str, float | None] = field(default_factory=lambda: dict(DEFAULT_GATES))

    def window(self) -> Window:
        return subset_window(self.subset)


def subset_window(subset: dict[str, Any]) -> Window:
    segments = subset.get("segment") or {}
    return Window(
        date_from=date.fromisoformat(subset["from"]) if subset.get("from") else None,
        date_to=date.fromisoformat(subset["to"]) if subset.get("to") else None,
        versions=(("model", subset["model"]),) if subset.get("model") else (),
        segments=tuple(sorted(segments.items())),
    )


def trial_spec(data: Any) -> TrialSpec:
    if not isinstance(data, dict):
        raise InvalidInput("The body must be a JSON object.")
    errors: dict[str, str] = {}
    known = {"name", "kind", "url", "headers", "headers_env", "timeout_s", "repeats", "subset", "gates"}
    for extra in sorted(set(data) - known):
        errors[extra] = "Unknown field."
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 100:
        errors["name"] = "A name of 1 to 100 characters is required."
    kind = data.get("kind", CandidateKind.HTTP)
    url = ""
    if kind not in CandidateKind.values:
        errors["kind"] = f"One of {', '.join(CandidateKind.values)}."
    elif kind == CandidateKind.HTTP:
        try:
            url = validate_pipeline_url(data.get("url"))
        except InvalidInput as exc:
            errors["url"] = exc.message.replace("HTTP pipeline", "candidate")
    elif data.get("url"):
        errors["url"] = "The reference candidate takes no url."
    # Absent and null mean none; any other value that is not an object is refused, not read as none
    # (false, 0, "" and [] once passed as "no headers").
    headers = data.get("headers")
    headers = {} if headers is None else headers
    if not isinstance(headers, dict) or not all(
        isinstance(k, str)
        and _HEADER_NAME.match(k)
        and isinstance(v, str)
        and 0 < len(v) <= _MAX_HEADER_VALUE
        and "\n" not in v
        and "\r" not in v
        for k, v in headers.items()
    ):
        errors["headers"] = "An object of header names to non-empty one-line string values."
        headers = {}
    headers_env = data.get("headers_env")
    headers_env = "" if headers_env is None else headers_env
    if not isinstance(headers_env, str) or (headers_env and not _ENV_NAME.match(headers_env)):
        errors["headers_env"] = "The name of an environment variable CANDIDATE_HEADER_<NAME> (A-Z, 0-9, _)."
    timeout_s = data.get("timeout_s", 10)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= 120:
        errors["timeout_s"] = "Seconds, more than 0 and at most 120."
    repeats = data.get("repeats", 3)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= 10:
        errors["repeats"] = "A whole number from 1 to 10."
    subset = _subset(data.get("subset"), errors)
    gates = _gates(data.get("gates"), errors)
    if errors:
        raise InvalidInput(
            "The trial request is not valid.",
            details=[detail(field, "invalid", message) for field, message in errors.items()],
        )
    return TrialSpec(
        name=name.strip(),
        kind=kind,
        url=url,
        headers=headers,
        headers_env=headers_env,
        timeout_s=float(timeout_s),
        repeats=repeats,
        subset=subset,
        gates=gates,
    )


def _subset(subset: Any, errors: dict[str, str]) -> dict[str, Any]:
    if subset in (None, {}):
        return {}
    if not isinstance(subset, dict) or set(subset) - {"from", "to", "segment", "model"}:
        errors["subset"] = 'An object with any of "from", "to", "segment", "model".'
        return {}
    clean: dict[str, Any] = {}
    for key in ("from", "to"):
        value = subset.get(key)
        if value in (None, ""):
            continue
        try:
            date.fromisoformat(value)
            clean[key] = value
        except (TypeError, ValueError):
            errors[f"subset.{key}"] = "A date, YYYY-MM-DD."
    segment = subset.get("segment")
    if isinstance(segment, str) and "=" in segment:  # "language=de", as the page's form sends it
        key, _, value = segment.partition("=")
        segment = {key.strip(): value.strip()}
    if segment not in (None, "", {}):
        if not isinstance(segment, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in segment.items()
        ):
            errors["subset.segment"] = 'An object of segment names to values, e.g. {"language": "de"}.'
        else:
            clean["segment"] = segment
    model = subset.get("model")
    if model not in (None, ""):
        if not isinstance(model, str) or len(model) > 200:
            errors["subset.model"] = "A model version string."
        else:
            clean["model"] = model
    return clean


def _gates(gates: Any, errors: dict[str, str]) -> dict[str, float | None]:
    clean = dict(DEFAULT_GATES)
    if gates is None:
        return clean
    if not isinstance(gates, dict) or set(gates) - set(DEFAULT_GATES):
        errors["gates"] = f"An object with any of {', '.join(DEFAULT_GATES)}."
        return clean
    for key, value in gates.items():
        if value is None and key == "min_coverage":
            clean[key] = None
        elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            errors[f"gates.{key}"] = "A non-negative number" + (" or null." if key == "min_coverage" else ".")
        elif key != "max_citation_errors" and value > 1:
            errors[f"gates.{key}"] = "A share between 0 and 1."
        else:
            clean[key] = float(value)
    return clean
