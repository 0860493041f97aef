"""What every page shares: the navigation says where you are, errors are pages of the site."""

import pytest
from django.test import Client

from tests.factories import ingest, make_route, make_user, record


@pytest.fixture
def pages(db):
    make_route("it-support", "IT support")
    client = Client()
    client.force_login(make_user("rita", "reviewer"))
    return client


def test_the_navigation_marks_the_current_page(pages):
    page = pages.get("/refusals/").content.decode()
    assert '<a href="/refusals/" aria-current="page">Refusals</a>' in page
    assert page.count('aria-current="page"') == 1


def test_a_forbidden_page_says_why_in_the_site_layout_and_links_back(pages):
    response = pages.get("/audit/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "Only auditors may read the audit trail." in page
    assert '<header class="top">' in page and 'href="/"' in page


def test_a_missing_page_is_a_404_in_the_site_layout(pages):
    response = pages.get("/decisions/999999/")
    assert response.status_code == 404
    page = response.content.decode()
    assert '<header class="top">' in page and "No such decision." in page


def test_a_service_error_in_a_page_view_becomes_its_status_not_a_500(db):
    make_route("it-support", "IT support")
    [decision_id] = ingest([record()])
    client = Client()
    client.force_login(make_user("gus", "grader"))
    response = client.get(f"/decisions/{decision_id}/")  # the selector raises Forbidden
    assert response.status_code == 403
    assert "Your role does not allow reading decisions." in response.content.decode()


def test_regions_that_htmx_swaps_are_announced(pages):
    assert 'id="decision-table" aria-live="polite"' in pages.get("/refusals/").content.decode()
