"""Conditional GETs: `If-None-Match` as RFC 9110 (section 13.1.2) reads it.

A GET with `If-None-Match` gets 304 when the header is `*` (the resource has a current
representation: the caller checks that before asking) or when any entity-tag in it matches the
current one by the weak comparison (section 8.8.3.2): `W/"x"` and `"x"` match each other, as a
client or a proxy may have weakened the tag it stored (a compressing proxy does). Tags that do not
parse are ignored, so a malformed header is a plain 200, never an error.
"""

from __future__ import annotations

from django.utils.http import parse_etags


def not_modified(request, etag: str) -> bool:
    """True when the request's `If-None-Match` says the client holds the representation `etag` names."""
    header = request.headers.get("If-None-Match")
    if header is None:
        return False
    tags = parse_etags(header)
    if tags == ["*"]:
        return True
    return any(_opaque(tag) == _opaque(etag) for tag in tags)


def _opaque(tag: str) -> str:
    return tag.removeprefix("W/")
