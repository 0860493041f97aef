"""What a policy's escalation channel may be, and where a message to it goes.

A channel is one of: ``mailto:ADDRESS``, a bare ``ADDRESS``, or an ``https://`` (or ``http://``)
URL that receives a signed webhook. Drafts are refused with anything else (a pager name, two
addresses, a header smuggled after a CR/LF), so a signed escalation path is always one a message can
reach; where it goes is then decided by the egress policy of the one outbound client.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from console.core.validation import is_one_email_address

CHANNEL_FORMS = "must be mailto:ADDRESS, an email address, or an https:// URL"


def channel_target(channel: str) -> tuple[str, str] | None:
    """``("email", address)`` or ``("webhook", url)`` for a channel of a documented form, else None
    (only versions signed before channels were checked can hold one)."""
    channel = channel.strip()
    if any(ord(c) < 32 or ord(c) == 127 or c.isspace() for c in channel):
        return None
    parts = urlsplit(channel)
    scheme = parts.scheme.lower()
    if scheme == "mailto":
        address = unquote(channel[len("mailto:") :].split("?", 1)[0])
        return ("email", address) if is_one_email_address(address) else None
    if scheme in ("http", "https"):
        return ("webhook", channel) if parts.hostname else None
    if is_one_email_address(channel):
        return ("email", channel)
    return None


def is_escalation_channel(channel: str) -> bool:
    return channel_target(channel) is not None
