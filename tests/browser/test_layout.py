import pytest

from tests.factories import make_route, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", [700, 1000, 1400])
def test_every_menu_entry_and_sign_out_stay_on_screen(sign_in, live_server, width):
    make_route("it-support", "IT support")
    make_user("ada", "admin")  # the longest menu
    page = sign_in("ada")
    page.set_viewport_size({"width": width, "height": 800})
    entries = ("Dashboard", "Refusals", "Operating points", "Grade", "Adjudicate", "Agreement", "Audit", "Admin", "API")
    for name in entries:
        box = page.locator("header.top nav a", has_text=name).first.bounding_box()
        assert box and 0 <= box["x"] and box["x"] + box["width"] <= width, name
    box = page.locator("header.top button", has_text="Sign out").bounding_box()
    assert box and box["x"] + box["width"] <= width
    assert page.locator('header.top nav a[aria-current="page"]').inner_text() == "Dashboard"
