"""An event's changes as the audit page shows them: each changed field's old and new value."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from audit.changes import changes_of

register = template.Library()

# A long value (a guidelines text, a pipeline's configuration) is cut here; the payload itself,
# one click away, holds it whole.
_SHOWN_CHARS = 80


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _value(value: Any) -> str:
    if value is None:
        return mark_safe('<span class="muted">none</span>')
    return format_html('<span class="value">{}</span>', _shown(value))


@register.simple_tag
def event_changes(event) -> str:
    """A list of ``field: old → new`` for an event recorded per field; "" for an event with no
    changed field and for one of the earlier shape (one top-level ``old``/``new`` pair), which the
    page shows as stored, in its payload."""
    changes = changes_of(event.payload)
    if not changes:
        return ""
    items = format_html_join(
        "",
        '<li><span class="mono">{}</span>: {} → {}</li>',
        ((name, _value(old), _value(new)) for name, old, new in changes),
    )
    return format_html('<ul class="changes">{}</ul>', items)
