"""A route's row holds what every app shares; each app's settings of it live in that app's own
one-to-one table, read with the app's defaults where a route has no row, and `create_route` (in
accounts) takes the apps' options and saves each part through its app's own audited service."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from audit.models import AuditEvent
from console.accounts.hooks import create_route_options
from console.accounts.models import Route
from console.shadow.models import RouteShadowSettings
from console.shadow.selectors import route_shadow_config
from grading.models import RouteGradingSettings
from grading.selectors import route_grading_settings
from tests.factories import TEST_ACTOR, make_route, make_user
from tests.grading.helpers import api_client


def _columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        return {column.name for column in connection.introspection.get_table_description(cursor, table)}


def _events(slug: str) -> list[tuple[str, dict]]:
    return list(AuditEvent.objects.filter(route=slug).order_by("seq").values_list("action", "payload"))


def test_the_route_table_holds_no_setting_of_an_upper_app(db):
    assert _columns(Route._meta.db_table) == {"id", "slug", "name", "created_at"}
    assert {"config"} <= _columns(RouteShadowSettings._meta.db_table)
    assert {"guidelines", "graders_per_item"} <= _columns(RouteGradingSettings._meta.db_table)


def test_each_apps_settings_live_in_its_own_table_keyed_by_the_route(db):
    route = make_route("billing", guidelines="Quote the rule.", graders_per_item=3, shadow_config={"kind": "reference"})
    assert RouteShadowSettings.objects.get(route=route).config == {"kind": "reference"}
    grading = RouteGradingSettings.objects.get(route=route)
    assert (grading.guidelines, grading.graders_per_item) == ("Quote the rule.", 3)
    assert (RouteShadowSettings._meta.pk.name, RouteGradingSettings._meta.pk.name) == ("route", "route")
    route.delete()  # the settings go with their route
    assert not RouteShadowSettings.objects.exists() and not RouteGradingSettings.objects.exists()


def test_a_route_without_settings_rows_has_every_apps_defaults(db):
    route = make_route("plain")
    assert not RouteShadowSettings.objects.exists() and not RouteGradingSettings.objects.exists()
    route = Route.objects.get(pk=route.pk)
    assert route_shadow_config(route) == {}
    grading = route_grading_settings(route)
    assert (grading.guidelines, grading.graders_per_item, grading._state.adding) == ("", 2, True)
    reader = make_user("lister", "reviewer")
    rows = [{"slug": "plain", "name": "Plain", "graders_per_item": 2}]
    assert api_client(reader).get("/api/v1/routes").json() == {"routes": rows, "results": rows, "next": None}


def test_the_routes_api_and_the_workspace_read_graders_per_item_from_gradings_table(db, django_assert_num_queries):
    make_route("billing", graders_per_item=4)
    make_route("plain")
    client = api_client(make_user("lister", "reviewer"))
    client.get("/api/v1/routes")  # the token's first use writes its last-used time
    with django_assert_num_queries(3):  # token, grants, routes with their field
        body = client.get("/api/v1/routes").json()
    assert [(r["slug"], r["graders_per_item"]) for r in body["routes"]] == [("billing", 4), ("plain", 2)]
    from django.test import Client

    page = Client()
    page.force_login(make_user("ada", "admin"))
    html = page.get("/workspace/").content.decode()
    assert '<th class="num">Graders per item</th>' in html
    assert '<td class="num">4</td>' in html and '<td class="num">2</td>' in html


def test_changing_a_setting_back_to_its_default_keeps_the_row_and_audits_the_change(db):
    route = make_route("billing", graders_per_item=3)
    from grading.services.pool import route_grading_set

    assert route_grading_set(actor=TEST_ACTOR, route=route, graders_per_item=2)
    assert RouteGradingSettings.objects.get(route=route).graders_per_item == 2
    assert not route_grading_set(actor=TEST_ACTOR, route=route, graders_per_item=2)  # nothing changed, no event
    updates = [payload for action, payload in _events("billing") if action == "route_updated"]
    assert updates == [{"graders_per_item": {"old": 2, "new": 3}}, {"graders_per_item": {"old": 3, "new": 2}}]


# --- manage.py create_route -----------------------------------------------------------------------


def test_create_route_lives_in_accounts_and_the_apps_add_their_options():
    from django.core.management import get_commands

    assert get_commands()["create_route"] == "console.accounts"
    assert [option.key for option in create_route_options()] == ["grading", "shadow"]


def test_create_route_with_shadows_options_stores_them_in_shadows_table_with_their_events(db, capsys):
    call_command("create_route", "billing", "--name", "Billing", "--shadow-url", "https://pipeline.internal/a")
    assert capsys.readouterr().out == "Created route billing (Billing).\n"
    route = Route.objects.get(slug="billing")
    assert RouteShadowSettings.objects.get(route=route).config == {"kind": "http", "url": "https://pipeline.internal/a"}
    assert not RouteGradingSettings.objects.exists()  # grading's options were left at their defaults
    assert _events("billing") == [
        ("route_created", {"slug": {"old": None, "new": "billing"}, "name": {"old": None, "new": "Billing"}}),
        (
            "shadow_pipeline_set",
            {
                "slug": "billing",
                "shadow_config": {"old": {}, "new": {"kind": "http", "url": "https://pipeline.internal/a"}},
            },
        ),
    ]
    assert {event.actor for event in AuditEvent.objects.filter(route="billing")} == {"system:create_route"}


def test_create_route_with_gradings_options_stores_them_in_gradings_table_with_their_event(db, capsys):
    call_command(
        "create_route", "billing", "--name", "Billing", "--graders-per-item", "3", "--guidelines", "Be strict."
    )
    grading = RouteGradingSettings.objects.get(route__slug="billing")
    assert (grading.guidelines, grading.graders_per_item) == ("Be strict.", 3)
    assert not RouteShadowSettings.objects.exists()
    assert _events("billing")[1] == (
        "route_updated",
        {"guidelines": {"old": "", "new": "Be strict."}, "graders_per_item": {"old": 2, "new": 3}},
    )


def test_create_route_writes_nothing_when_one_apps_part_is_refused(db):
    before = AuditEvent.objects.count()
    with pytest.raises(CommandError, match="graders_per_item"):
        call_command("create_route", "billing", "--name", "Billing", "--graders-per-item", "0", "--shadow", "reference")
    with pytest.raises(CommandError, match="http"):
        call_command("create_route", "billing", "--name", "Billing", "--shadow-url", "ftp://files/x")
    assert not Route.objects.exists() and not RouteShadowSettings.objects.exists()
    assert AuditEvent.objects.count() == before


def test_create_route_on_an_existing_route_sets_only_the_pipeline(db, capsys):
    make_route("billing", graders_per_item=3)
    call_command("create_route", "billing", "--shadow", "reference", "--graders-per-item", "5")
    assert capsys.readouterr().out == "Route billing: shadow pipeline set to {'kind': 'reference'}.\n"
    assert route_shadow_config(Route.objects.get(slug="billing")) == {"kind": "reference"}
    assert RouteGradingSettings.objects.get(route__slug="billing").graders_per_item == 3
