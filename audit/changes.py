"""The one shape of an audited change: ``{"<field>": {"old": ..., "new": ...}}``.

Every service records what it changed field by field (Zulip's ``OLD_VALUE`` / ``NEW_VALUE``), so an
auditor reads the same shape whatever the event: a creation has ``old: null`` on each field, a
deletion or withdrawal ``new: null``. What is not a change (ids, reasons, notes, the objects an
event names) stays a plain key beside the changed fields.

Events written before this shape was the only one keep theirs (the trail is append-only and
hash-chained, so a stored payload is never rewritten): ``{"old": {...}, "new": {...}}``, ``{"new":
{...}}`` for a creation, ``{"old": [...], "new": x}``. `is_legacy` recognises them.

Pure: no Django, no other app, so any app may build its payloads with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_CHANGE_KEYS = frozenset({"old", "new"})


def field_changes(*, old: Mapping[str, Any] | None = None, new: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{field: {"old", "new"}}`` for each field whose value differs between `old` and `new`.

    A field missing on one side is None there: ``field_changes(new=row)`` records a creation and
    ``field_changes(old=row)`` a deletion. Fields come in the order of `new`, then those only in `old`.
    """
    old, new = old or {}, new or {}
    fields = list(new) + [name for name in old if name not in new]
    return {name: {"old": old.get(name), "new": new.get(name)} for name in fields if old.get(name) != new.get(name)}


def is_change(value: Any) -> bool:
    """Whether `value` is one field's change: a dict of exactly ``old`` and ``new``."""
    return isinstance(value, dict) and value.keys() == _CHANGE_KEYS


def is_legacy(payload: Any) -> bool:
    """Whether `payload` has the earlier shape, the change as one top-level ``old``/``new`` pair."""
    return isinstance(payload, dict) and bool(_CHANGE_KEYS & payload.keys())


def changes_of(payload: Any) -> list[tuple[str, Any, Any]]:
    """``(field, old, new)`` for each changed field of a per-field payload, by field name (jsonb keeps
    no key order); nothing for a payload of the earlier shape, whose change is one pair shown as stored."""
    if not isinstance(payload, dict) or is_legacy(payload):
        return []
    return [(name, value["old"], value["new"]) for name, value in sorted(payload.items()) if is_change(value)]
