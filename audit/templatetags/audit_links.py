"""Links from audit events to the pages of the objects they are about."""

from __future__ import annotations

import json

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

register = template.Library()

# Objects with a page of their own, by type: the page's address from the object's id.
_PAGES = {
    "decision": lambda oid: reverse("decision-detail", args=[int(oid)]),
    "route": lambda oid: f"{reverse('operating-points')}?{urlencode({'route': oid})}",
}


def _page_of(kind: str, oid) -> str | None:
    try:
        return _PAGES[kind](str(oid)) if kind in _PAGES else None
    except (ValueError, NoReverseMatch):
        return None


@register.simple_tag
def event_object(event) -> str:
    """``type:id``, linked to its page where it has one, followed by the decisions the event
    lists in its payload (a grade's or a label's decision), each linked."""
    name = f"{event.object_type}:{event.object_id}"
    # A route event's object id is the route's id or its slug, depending on the event; its
    # route field always holds the slug.
    url = (
        _page_of("route", event.route)
        if event.object_type == "route" and event.route
        else _page_of(event.object_type, event.object_id)
    )
    main = format_html('<a href="{}">{}</a>', url, name) if url else format_html("{}", name)
    related = (event.payload or {}).get("objects") if isinstance(event.payload, dict) else None
    decisions = related.get("decision", []) if isinstance(related, dict) else []
    decisions = [d for d in decisions if str(d) != str(event.object_id) or event.object_type != "decision"]
    if not decisions:
        return main
    shown = format_html_join(
        ", ",
        '<a href="{}">decision:{}</a>',
        ((_page_of("decision", d), d) for d in decisions[:5] if _page_of("decision", d)),
    )
    more = f" and {len(decisions) - 5} more" if len(decisions) > 5 else ""
    return format_html('{} <small class="muted">({}{})</small>', main, shown, more)


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
