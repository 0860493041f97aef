"""Template filters of the grading pages."""

import markdown as markdown_lib
import nh3
from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter
def render_markdown(text: str) -> SafeString:
    """Guidelines are Markdown written by reviewers; nh3 strips anything that could run in the page."""
    html = markdown_lib.markdown(text or "", extensions=["extra", "sane_lists"], output_format="html")
    return mark_safe(nh3.clean(html))  # noqa: S308 - sanitised by nh3 just above
