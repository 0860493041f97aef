"""shadow 0004 and grading 0010 copy a route's settings from its row into their own tables before
accounts 0006 drops the columns; reversed, the values go back onto the route's row."""

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from console.core.db_roles import app_privileges_grant, as_owner
from console.shadow.models import RouteShadowSettings
from grading.models import RouteGradingSettings

BEFORE = [
    ("accounts", "0006_apitoken_rate_limit"),
    ("shadow", "0003_decision_reference_checked"),
    ("grading", "0009_route_on_the_ground_floor"),
]
AFTER = [
    ("accounts", "0007_route_settings_in_their_apps"),
    ("shadow", "0004_route_shadow_settings"),
    ("grading", "0010_route_grading_settings"),
]


def _migrate(target):
    """Migrate to `target` as the owner role, as `migrate` does (the tests run as the app role), and
    give the app role its rights on the tables made again, as `migrate` does after the last one."""
    with as_owner() as app_role:
        executor = MigrationExecutor(connection)
        executor.migrate(target)
        if app_role:
            app_privileges_grant(alias="default", app_role=app_role)
        return executor.loader.project_state(target).apps


def _rows(OldRoute) -> list[tuple]:
    columns = ("slug", "guidelines", "graders_per_item", "shadow_config")
    return list(OldRoute.objects.order_by("slug").values_list(*columns))


def test_the_upper_apps_copies_run_before_the_route_loses_its_columns():
    graph = MigrationLoader(None).graph  # the files alone, no database
    drop = graph.node_map[("accounts", "0007_route_settings_in_their_apps")]
    assert {("shadow", "0004_route_shadow_settings"), ("grading", "0010_route_grading_settings")} <= {
        parent.key for parent in drop.parents
    }


@pytest.mark.django_db(transaction=True)
def test_the_migrations_move_each_setting_into_its_apps_table_and_back():
    try:
        old_apps = _migrate(BEFORE)
        OldRoute = old_apps.get_model("accounts", "Route")
        OldRoute.objects.create(slug="plain", name="Plain")
        OldRoute.objects.create(slug="shadowed", name="Shadowed", shadow_config={"kind": "reference"})
        OldRoute.objects.create(slug="graded", name="Graded", guidelines="Be strict.", graders_per_item=3)
        before = _rows(OldRoute)

        _migrate(AFTER)
        assert dict(RouteShadowSettings.objects.values_list("route__slug", "config")) == {
            "shadowed": {"kind": "reference"}
        }
        assert list(RouteGradingSettings.objects.values_list("route__slug", "guidelines", "graders_per_item")) == [
            ("graded", "Be strict.", 3)
        ]  # routes at the defaults get no row

        old_apps = _migrate(BEFORE)
        assert _rows(old_apps.get_model("accounts", "Route")) == before
    finally:
        call_command("migrate", verbosity=0)  # every app forward again, for the tests after this one
