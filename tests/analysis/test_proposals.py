"""The "Propose as policy" links of the operating-points page carry the middle band and the costs the
user chose in the band simulator and the cost calculator, though those forms swap only their own
region (htmx): their responses bring every other link again, out of band. The draft form opens
prefilled with what a link carries."""

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from tests.analysis.populations import census_world
from tests.factories import make_user

PAGE = "/operating-points/"
TABLE = "route=it-support&cutoffs=0.5,0.8"


@pytest.fixture
def lead(route):
    client = Client()
    client.force_login(make_user("lead", "policy_owner", route))
    return client


graded_world = census_world(n=240, seed=7)


def _region(client, target: str, query: str, current: str):
    return client.get(
        f"{PAGE}?{query}",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET=target,
        HTTP_HX_CURRENT_URL=f"http://testserver{PAGE}?{current}",
    )


def _links(html: str) -> dict[str, tuple[dict[str, list[str]], bool]]:
    """Each propose link by its id: the query its href carries, and whether it is swapped out of band."""
    found = {}
    for tag in re.findall(r'<a [^>]*id="propose-[^"]+"[^>]*>', html):
        link_id = re.search(r'id="([^"]+)"', tag).group(1)
        href = unescape(re.search(r'href="([^"]+)"', tag).group(1))
        assert urlsplit(href).path == "/routes/it-support/policy/draft/"
        found[link_id] = (parse_qs(urlsplit(href).query), 'hx-swap-oob="true"' in tag)
    return found


def test_a_simulated_band_comes_back_with_every_propose_link_carrying_it(lead, graded):
    response = _region(lead, "band", "band_lower=0.3&band_cutoff=0.8", current=f"{TABLE}&c_w=30&c_a=1")
    assert response.status_code == 200
    links = _links(response.content.decode())
    # The table's two cutoffs (the no-gate row has no link), out of band; the band's own link in place.
    assert {"propose-row-1", "propose-row-2", "propose-band"} <= links.keys()
    for row, cutoff in (("propose-row-1", "0.5"), ("propose-row-2", "0.8")):
        query, out_of_band = links[row]
        assert out_of_band and query["cutoff"] == [cutoff] and query["band_lower"] == ["0.3"]
        assert query["c_w"] == ["30"] and query["c_a"] == ["1"]
    band_query, out_of_band = links["propose-band"]
    assert not out_of_band and band_query["cutoff"] == ["0.8"] and band_query["band_lower"] == ["0.3"]
    assert response["HX-Push-Url"].endswith("band_lower=0.3&band_cutoff=0.8")


def test_computed_costs_come_back_with_every_propose_link_carrying_them(lead, graded):
    response = _region(lead, "cost", "c_w=30&c_a=1&q=0.5&c_v=0.1", current=f"{TABLE}&band_lower=0.3&band_cutoff=0.8")
    links = _links(response.content.decode())
    assert {"propose-row-1", "propose-row-2", "propose-band"} <= links.keys()
    for query, out_of_band in links.values():
        assert out_of_band
        assert (query["c_w"], query["c_a"], query["q"], query["c_v"]) == (["30"], ["1"], ["0.5"], ["0.1"])
        assert query["band_lower"] == ["0.3"]


def test_a_band_above_a_rows_cutoff_is_left_out_of_that_rows_link(lead, graded):
    links = _links(_region(lead, "band", "band_lower=0.6&band_cutoff=0.8", current=TABLE).content.decode())
    assert "band_lower" not in links["propose-row-1"][0]  # cutoff 0.5: the band would lie above it
    assert links["propose-row-2"][0]["band_lower"] == ["0.6"]


def test_costs_or_a_band_the_forms_refuse_are_not_carried(lead, graded):
    links = _links(_region(lead, "cost", "c_w=0.1&c_a=5", current=TABLE).content.decode())
    assert links and all("c_w" not in query and "c_a" not in query for query, _ in links.values())
    links = _links(_region(lead, "band", "band_lower=0.9&band_cutoff=0.5", current=TABLE).content.decode())
    assert "propose-band" not in links and all("band_lower" not in query for query, _ in links.values())


def test_a_full_page_with_a_chosen_band_and_costs_carries_them_in_place(lead, graded):
    html = lead.get(f"{PAGE}?{TABLE}&band_lower=0.3&band_cutoff=0.8&c_w=30&c_a=1").content.decode()
    links = _links(html)
    assert not any(out_of_band for _, out_of_band in links.values())
    assert links["propose-row-2"][0]["band_lower"] == ["0.3"] and links["propose-row-2"][0]["c_w"] == ["30"]


def test_readers_who_may_not_draft_get_no_propose_links_out_of_band(route, graded):
    client = Client()
    client.force_login(make_user("ivy", "integrator"))
    response = _region(client, "band", "band_lower=0.3&band_cutoff=0.8", current=TABLE)
    assert response.status_code == 200 and not _links(response.content.decode())


def test_the_draft_form_opens_with_the_band_and_costs_the_link_carries(lead, graded):
    links = _links(
        _region(lead, "cost", "c_w=30&c_a=1", current=f"{TABLE}&band_lower=0.3&band_cutoff=0.8").content.decode()
    )
    query, _ = links["propose-band"]
    html = lead.get(
        "/routes/it-support/policy/draft/", {name: values[0] for name, values in query.items()}
    ).content.decode()
    assert 'id="id_cutoff" name="cutoff" value="0.8"' in html
    assert 'id="id_band_lower" name="band_lower" value="0.3"' in html
    assert 'name="c_w" value="30"' in html and 'name="c_a" value="1"' in html
