"""Template filters of the grading pages."""

import markdown as markdown_lib
import nh3
from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# `data:` is allowed only as an image source (checked in _allow_attribute); nh3 needs the scheme listed.
_URL_SCHEMES = nh3.ALLOWED_URL_SCHEMES | {"data"}


def _is_local_or_data_image(src: str) -> bool:
    """A path on this site or an inline image: neither lets the author learn who viewed the page.

    Anything with a scheme or a host (`https://`, `//host`, and `/\\host`, which browsers read as
    `//host`) would fetch from another server, a tracking pixel on a grader's screen.
    """
    if "\\" in src or any(ord(char) <= 0x20 for char in src):
        return False
    if src[:11].lower() == "data:image/":
        return True
    return not src.startswith("//") and ":" not in src.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]


def _allow_attribute(element: str, attribute: str, value: str) -> str | None:
    if element == "img" and attribute == "src":
        return value if _is_local_or_data_image(value) else None
    if value.strip()[:5].lower() == "data:":
        return None  # a data: link (href, cite) could carry a page of its own
    return value


@register.filter
def render_markdown(text: str) -> SafeString:
    """Guidelines are Markdown written by reviewers; nh3 strips anything that could run in the page,
    and images that would load from another site."""
    html = markdown_lib.markdown(text or "", extensions=["extra", "sane_lists"], output_format="html")
    cleaned = nh3.clean(html, url_schemes=_URL_SCHEMES, attribute_filter=_allow_attribute)
    return mark_safe(cleaned)  # noqa: S308 - sanitised by nh3 just above


@register.filter
def shortest(value) -> str:
    """A number in its shortest form, as the plan names its bands: 0.5, not 0.500; 1, not 1.0."""
    try:
        return format(float(value), "g")
    except (TypeError, ValueError):
        return ""
