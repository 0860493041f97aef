"""The Django admin cannot change audited data behind the audit trail's back.

A superuser POSTs to the admin's add, change and delete URLs of every model whose changes the
console audits: each is refused (403) and the event count does not move, or (routes) the change
goes through the audited service and writes its event.
"""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client

from audit.models import AuditEvent
from console.accounts.models import ApiToken, RoleGrant, Route
from console.shadow.models import ShadowRun
from console.shadow.selectors import route_shadow_config
from grading.models import Assignment, FinalLabel, Grade, GradingItem, GradingPlan
from tests.factories import make_route, make_token, make_user, record
from tests.grading.helpers import api_client, grade, next_item, pooled

User = get_user_model()

# Admins that may save, because their saves call an audited service.
SERVICE_BACKED = {"accounts.route"}
# Models the console does not audit at all (Django's own groups: the console's roles are RoleGrants).
NOT_AUDITED = {"auth.group"}


@pytest.fixture
def superuser_browser(route):
    root = make_user("root")
    root.is_staff = root.is_superuser = True
    root.save()
    browser = Client()
    browser.force_login(root)
    return browser


@pytest.fixture
def audited_rows(route):
    """One row of each audited model, made through the services like in real use."""
    graders = [api_client(make_user(f"g{i}", "grader")) for i in range(2)]
    make_user("grantee", "reviewer", route)
    make_token(User.objects.get(username="grantee"))
    [decision_id] = pooled([record()])
    item = next_item(graders[0])
    assert next_item(graders[1])["id"] == item["id"]
    for client in graders:
        assert grade(client, item["id"], "correct").status_code == 201
    assert FinalLabel.objects.filter(decision_id=decision_id, correct=True).exists()
    return {
        FinalLabel: FinalLabel.objects.get(decision_id=decision_id),
        Grade: Grade.objects.first(),
        Assignment: Assignment.objects.first(),
        GradingItem: GradingItem.objects.get(decision_id=decision_id),
        RoleGrant: RoleGrant.objects.get(user__username="grantee"),
        ApiToken: ApiToken.objects.filter(user__username="grantee").first(),
        User: User.objects.get(username="grantee"),
    }


def _label(model) -> str:
    return f"{model._meta.app_label}.{model._meta.model_name}"


def _url(model, view: str, pk=None) -> str:
    base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    return base + ("add/" if view == "add" else f"{pk}/{view}/")


def test_every_admin_of_an_audited_model_is_read_only_or_service_backed(superuser_browser):
    request = type("R", (), {"user": User.objects.get(username="root")})()
    for model, model_admin in admin.site._registry.items():
        label = _label(model)
        if label in NOT_AUDITED:
            continue
        if label in SERVICE_BACKED:
            assert not model_admin.has_add_permission(request) and not model_admin.has_delete_permission(request)
            continue
        assert not model_admin.has_add_permission(request), label
        assert not model_admin.has_change_permission(request), label
        assert not model_admin.has_delete_permission(request), label
        assert superuser_browser.get(_url(model, "add")).status_code == 403, label


def test_a_superuser_cannot_edit_a_final_label_or_grant_a_role_in_the_admin(superuser_browser, audited_rows, route):
    label = audited_rows[FinalLabel]
    before = AuditEvent.objects.count()
    # The page shows the label read-only ...
    page = superuser_browser.get(_url(FinalLabel, "change", label.pk))
    assert page.status_code == 200 and b'name="correct"' not in page.content
    # ... and a crafted POST is refused.
    response = superuser_browser.post(
        _url(FinalLabel, "change", label.pk), {"decision": label.decision_id, "correct": "", "method": "adjudicated"}
    )
    assert response.status_code == 403
    label.refresh_from_db()
    assert label.correct is True
    grantee = audited_rows[User]
    response = superuser_browser.post(_url(RoleGrant, "add"), {"user": grantee.pk, "role": "admin", "route": ""})
    assert response.status_code == 403
    assert not RoleGrant.objects.filter(user=grantee, role="admin").exists()
    response = superuser_browser.post(
        _url(User, "add"), {"username": "sneaky", "password1": "pw-12345678x", "password2": "pw-12345678x"}
    )
    assert response.status_code == 403 and not User.objects.filter(username="sneaky").exists()
    response = superuser_browser.post(
        _url(User, "change", grantee.pk), {"username": grantee.username, "is_superuser": "on", "is_staff": "on"}
    )
    assert response.status_code == 403
    grantee.refresh_from_db()
    assert not grantee.is_superuser
    assert (
        superuser_browser.post(
            f"/admin/auth/user/{grantee.pk}/password/", {"password1": "x-12345678", "password2": "x-12345678"}
        ).status_code
        == 403
    )
    assert AuditEvent.objects.count() == before


def test_every_audited_row_refuses_change_and_delete_posts(superuser_browser, audited_rows):
    before = AuditEvent.objects.count()
    counts = {model: model.objects.count() for model in audited_rows}
    for model, row in audited_rows.items():
        assert superuser_browser.get(_url(model, "change", row.pk)).status_code == 200, _label(model)  # viewable
        assert superuser_browser.post(_url(model, "change", row.pk), {}).status_code == 403, _label(model)
        assert superuser_browser.post(_url(model, "delete", row.pk), {"post": "yes"}).status_code == 403, _label(model)
        changelist = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        bulk = superuser_browser.post(
            changelist, {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"}
        )
        assert bulk.status_code in (200, 302, 403), _label(model)
        assert model.objects.count() == counts[model], f"{_label(model)} row deleted through the admin"
    for model in (GradingPlan, ShadowRun):
        assert superuser_browser.post(_url(model, "add"), {}).status_code == 403
    assert AuditEvent.objects.count() == before


def test_a_route_edit_in_the_admin_writes_its_event(superuser_browser, route):
    before = AuditEvent.objects.count()
    response = superuser_browser.post(
        _url(type(route), "change", route.pk), {"shadow_kind": "reference", "shadow_url": "", "name": "Renamed"}
    )
    assert response.status_code == 302
    route = Route.objects.get(pk=route.pk)
    assert route_shadow_config(route) == {"kind": "reference"} and route.name == "IT support"
    assert AuditEvent.objects.count() == before + 1
    assert AuditEvent.objects.order_by("-seq").first().action == "shadow_pipeline_set"
    assert superuser_browser.post(_url(type(route), "add"), {"slug": "x", "name": "X"}).status_code == 403
    assert superuser_browser.post(_url(type(route), "delete", route.pk), {"post": "yes"}).status_code == 403
    assert make_route("it-support").pk == route.pk


def test_revoking_tokens_in_the_admin_goes_through_the_audited_service(superuser_browser, route):
    from rest_framework.test import APIClient

    holder = make_user("holder", "reviewer")
    key = make_token(holder)
    token = ApiToken.objects.get(user=holder)
    before = AuditEvent.objects.count()
    revoke = {"action": "revoke", "_selected_action": [token.pk], "index": 0}
    response = superuser_browser.post("/admin/accounts/apitoken/", revoke)
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    event = AuditEvent.objects.order_by("-seq").first()
    assert AuditEvent.objects.count() == before + 1
    assert (event.action, event.actor) == ("token_revoked", "user:root")
    assert event.payload["token_prefix"] == key[:12]
    assert event.payload["revoked_at"] == {"old": None, "new": token.revoked_at.isoformat()}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/routes").status_code == 401
    # Revoking it again changes nothing and records nothing.
    superuser_browser.post("/admin/accounts/apitoken/", revoke)
    assert AuditEvent.objects.count() == before + 1
