"""The daily look, measured in a real browser: sticky headers, tabular right-aligned numbers,
dates and versions on one line, and a dark theme that follows the system's."""

import pytest

from tests.factories import ingest, make_route, make_user, record

pytestmark = pytest.mark.django_db(transaction=True)

LONG_MODEL = "gen-2026-11-ultra-long-release-candidate-with-a-very-long-name"


@pytest.fixture
def refusals(sign_in, live_server):
    make_route("it-support", "IT support")
    ingest([record(question=f"Question {i}", versions={"model": LONG_MODEL}) for i in range(60)])
    make_user("rita", "reviewer")
    page = sign_in("rita")
    page.set_viewport_size({"width": 1000, "height": 700})
    page.goto(f"{live_server.url}/refusals/")
    page.wait_for_selector("table.list tbody tr")
    return page


def test_the_header_row_stays_in_view_while_the_list_scrolls(refusals):
    refusals.mouse.wheel(0, 1500)
    refusals.wait_for_function("() => window.scrollY > 1000")
    header = refusals.locator("table.list thead th").first.bounding_box()
    assert -1 <= header["y"] <= 1


def test_numbers_are_right_aligned_in_tabular_figures(refusals):
    style = refusals.evaluate("""() => { const s = getComputedStyle(document.querySelector('table.list td.num'));
                                 return [s.textAlign, s.fontVariantNumeric]; }""")
    assert style == ["right", "tabular-nums"]


def test_dates_and_versions_keep_to_one_line_and_versions_show_in_full_on_hover(refusals):
    row = refusals.locator("table.list tbody tr").first
    line = row.locator("td.date").evaluate("el => parseFloat(getComputedStyle(el).lineHeight)")
    assert row.locator("td.date").evaluate("el => el.getBoundingClientRect().height") < 2 * line + 16
    version = row.locator("td.version")
    assert version.get_attribute("title") == LONG_MODEL
    assert version.evaluate("el => el.scrollWidth > el.clientWidth")  # truncated with an ellipsis
    assert version.evaluate("el => el.getBoundingClientRect().height") < 2 * line + 16


def _luminance(rgb: str) -> float:
    r, g, b = (int(x) for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_the_theme_follows_the_system_colour_scheme(refusals):
    refusals.emulate_media(color_scheme="light")
    light = refusals.evaluate("() => getComputedStyle(document.body).backgroundColor")
    refusals.emulate_media(color_scheme="dark")
    dark = refusals.evaluate("() => getComputedStyle(document.body).backgroundColor")
    table = refusals.evaluate("() => getComputedStyle(document.querySelector('table.list')).backgroundColor")
    ink = refusals.evaluate("() => getComputedStyle(document.querySelector('table.list td')).color")
    assert _luminance(light) > 0.9 and _luminance(dark) < 0.15 and _luminance(table) < 0.2
    assert _luminance(ink) > 0.7  # light text on the dark table
