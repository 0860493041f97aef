"""shadow 0004 and grading 0010 copy a route's settings from its row into their own tables before
accounts 0006 drops the columns; reversed, the values go back onto the route's row."""

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from console.core.db_roles import as_owner
from console.shadow.models import RouteShadowSettings
from grading.models import RouteGradingSettings

BEFORE = [
    ("accounts", "0005_route_on_the_ground_floor"),
    ("shadow", "0003_decision_reference_checked"),
    ("grading", "0009_route_on_the_ground_floor"),
]
AFTER = [
    ("accounts", "0006_route_settings_in_their_apps"),
    ("shadow", "0004_route_shadow_settings"),
    ("grading", "0010_route_grading_settings"),
]


def _migrate(target):
    """Migrate to `target` as the owner role, as `migrate` does (the tests run as the app role)."""
    with as_owner():
        executor = MigrationExecutor(connection)
        executor.migrate(target)
        return executor.loader.project_state(target).apps


def test_the_upper_apps_copies_run_before_the_route_loses_its_columns():
    graph = MigrationExecutor(connection).loader.graph
    drop = graph.node_map[("accounts", "0006_route_settings_in_their_apps")]
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
        before = set(OldRoute.objects.values_list("slug", "guidelines", "graders_per_item", "shadow_config"))

        _migrate(AFTER)
        assert dict(RouteShadowSettings.objects.values_list("route__slug", "config")) == {
            "shadowed": {"kind": "reference"}
        }
        assert list(RouteGradingSettings.objects.values_list("route__slug", "guidelines", "graders_per_item")) == [
            ("graded", "Be strict.", 3)
        ]  # routes at the defaults get no row

        old_apps = _migrate(BEFORE)
        back = old_apps.get_model("accounts", "Route").objects
        assert set(back.values_list("slug", "guidelines", "graders_per_item", "shadow_config")) == before
    finally:
        call_command("migrate", verbosity=0)  # every app forward again, for the tests after this one
