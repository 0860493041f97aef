"""An admin sets up a route from the browser: creates it, gives a new person a role on it, creates an
API token for the integrator and copies its key (shown once), then revokes the token."""

import pytest

from console.accounts.models import ApiToken, RoleGrant, Route
from console.shadow.selectors import route_shadow_config
from grading.selectors import route_grading_settings
from tests.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_creates_a_route_adds_a_member_and_issues_then_revokes_a_token(sign_in, live_server):
    make_user("ada", "admin")
    make_user("ingo", "integrator")

    page = sign_in("ada")
    page.click("header.top nav a:has-text('Admin')")
    page.click("nav.tabs a:has-text('New route')")
    page.fill("#id_slug", "billing")
    page.fill("#id_route-name", "Billing questions")
    page.fill("#id_route-graders_per_item", "3")
    page.fill("#id_grading-guidelines", "Correct only when the invoice rule is quoted.")
    page.select_option("#id_shadow-pipeline", "reference")
    page.click("button:has-text('Create route')")
    page.wait_for_load_state("networkidle")
    assert page.url.endswith("/routes/billing/members/")
    assert "Route billing created." in page.inner_text("ul.messages")
    route = Route.objects.get(slug="billing")
    assert (route_grading_settings(route).graders_per_item, route_shadow_config(route)) == (3, {"kind": "reference"})

    # A person nobody has added yet: the page asks for an email address first, in words.
    page.fill("#id_username", "gwen")
    page.select_option("#id_role", "grader")
    page.click("button:has-text('Grant the role')")
    page.wait_for_load_state("networkidle")
    assert "give their email address" in page.inner_text("#id_email_error")
    page.fill("#id_email", "gwen@example.org")
    page.click("button:has-text('Grant the role')")
    page.wait_for_load_state("networkidle")
    assert "gwen is now grader here." in page.inner_text("ul.messages")
    assert "gwen" in page.inner_text("#route-members")
    assert RoleGrant.objects.get(user__username="gwen").route == route

    page.click("nav.tabs a:has-text('API tokens')")
    page.fill("#id_name", "billing answering service")
    page.fill("#id_owner", "ingo")
    page.click("button:has-text('Create token')")
    page.wait_for_load_state("networkidle")
    key = page.inner_text("#new-token-key").strip()
    assert key.startswith("arc_")
    token = ApiToken.objects.get(name="billing answering service")
    assert token.key_hash != key and token.prefix == key[:12]
    page.goto(f"{live_server.url}/tokens/")
    assert page.locator("#new-token-key").count() == 0 and key not in page.content()

    row = page.locator("#token-list tr", has_text="billing answering service")
    assert "live" in row.inner_text()
    row.locator("button:has-text('Revoke')").click()
    page.wait_for_load_state("networkidle")
    assert "revoked" in page.inner_text("ul.messages")
    assert "revoked" in page.locator("#token-list tr", has_text="billing answering service").inner_text()
    token.refresh_from_db()
    assert token.revoked_at is not None
