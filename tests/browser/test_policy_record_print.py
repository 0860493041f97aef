"""The decision record's Print button works under the site's Content-Security-Policy, which refuses
inline event handlers: the click is wired by a static script."""

import pytest

from tests.analysis.populations import census
from tests.browser.test_content_security_policy import _watch_violations
from tests.governance.conftest import draft_body

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_print_button_opens_the_print_dialog_without_breaking_the_policy(
    integrator, reviewer, owner, sign_in, live_server, page
):
    census(integrator, n=300, seed=3)
    response = reviewer.post("/api/v1/routes/it-support/policies", draft_body(), format="json")
    assert response.status_code == 201, response.json()
    violations = _watch_violations(page)
    # Counts the calls instead of opening a dialog that would block the headless browser.
    page.add_init_script("window.printed = 0; window.print = () => { window.printed += 1; };")
    sign_in("owner")
    page.goto(f"{live_server.url}/policies/{response.json()['id']}/")
    page.click("button:has-text('Print')")
    assert page.evaluate("() => window.printed") == 1
    assert violations == []
