"""Emails as people read them: one text template and one HTML template (templates/notify/email.*)
render every message, alone or several in a daily digest, from the same parts.

A part is plain data (it is stored as JSON while it waits for a digest): a title, paragraphs,
label/value facts and one link. Links are absolute (CONSOLE_URL): an email is read outside the site.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.template.loader import render_to_string


@dataclass(frozen=True)
class EmailPart:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    url: str = ""
    link_label: str = "Open it in the console"

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> EmailPart:
        return cls(
            title=data["title"],
            paragraphs=list(data.get("paragraphs", [])),
            facts=[tuple(fact) for fact in data.get("facts", [])],
            url=data.get("url", ""),
            link_label=data.get("link_label", ""),
        )


def absolute_url(path: str) -> str:
    """A path of this site as a link that works from an inbox."""
    return f"{settings.CONSOLE_URL}{path}"


def email_render(*, heading: str, parts: list[EmailPart], footer: str = "") -> tuple[str, str]:
    """(text, html) of one email made of `parts`."""
    context = {"heading": heading, "parts": parts, "footer": footer, "console_url": settings.CONSOLE_URL}
    return render_to_string("notify/email.txt", context), render_to_string("notify/email.html", context)
