"""What a sign-in through the provider does to the console: the person is found by issuer and
subject, their roles follow the roles claim at every sign-in (a removal audited), grants an admin made
stay, people the provider no longer knows are deactivated in one command, and LOCAL_LOGIN=0 hides and
refuses local passwords."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from audit.models import AuditEvent
from console.accounts.identity.roles import roles_from_claim
from console.accounts.identity.services import identity_sign_in
from console.accounts.models import Identity, RoleGrant
from console.core.errors import Conflict
from tests import factories

ISSUER = "https://id.example.test"
User = get_user_model()


def sign_in(groups, *, sub="s-ada", username="ada", **claims):
    return identity_sign_in(
        issuer=ISSUER,
        claims={"sub": sub, "preferred_username": username, "groups": groups, **claims},
        roles_claim="groups",
    )


def grants(user) -> set[tuple[str, str | None, str]]:
    return {
        (g.role, g.route.slug if g.route_id else None, g.source)
        for g in RoleGrant.objects.filter(user=user).select_related("route")
    }


def test_the_roles_claim_names_a_role_everywhere_or_on_one_route():
    assert roles_from_claim(
        [
            "reviewer:it-support",
            "grader",
            "/auditor",
            "engineering",
            "reader:no-such-route",
            "admin:it-support",
            "admin",
        ],
        route_slugs={"it-support"},
    ) == {("reviewer", "it-support"), ("grader", None), ("auditor", None), ("admin", None)}
    assert roles_from_claim("reader", route_slugs=set()) == {("reader", None)}
    assert roles_from_claim(None, route_slugs=set()) == set()


def test_a_first_sign_in_creates_the_person_with_the_roles_their_groups_name(route):
    signed_in = sign_in(["reviewer:it-support", "grader", "engineering"], email="ada@example.org")
    assert signed_in.user.username == "ada" and signed_in.user.email == "ada@example.org"
    assert not signed_in.user.has_usable_password()
    assert grants(signed_in.user) == {("reviewer", "it-support", "provider"), ("grader", None, "provider")}
    actions = list(AuditEvent.objects.filter(object_id=str(signed_in.user.pk)).values_list("action", flat=True))
    assert actions.count("role_granted") == 2 and "identity_linked" in actions and "user_created" in actions


def test_the_username_falls_back_to_the_email_then_the_subject(db):
    assert (
        identity_sign_in(issuer=ISSUER, claims={"sub": "s-1", "email": "e@x.org"}, roles_claim="groups").user.username
        == "e@x.org"
    )
    assert identity_sign_in(issuer=ISSUER, claims={"sub": "s-2"}, roles_claim="groups").user.username == "s-2"


def test_a_group_removed_at_the_provider_takes_the_role_away_at_the_next_sign_in(route):
    user = sign_in(["reviewer:it-support", "grader"]).user
    again = sign_in(["grader"])
    assert again.user == user and again.revoked == [("reviewer", "it-support")]
    assert grants(user) == {("grader", None, "provider")}
    event = AuditEvent.objects.filter(action="role_revoked", object_id=str(user.pk)).get()
    assert event.payload["role"] == {"old": "reviewer", "new": None}
    assert event.payload["route"] == "it-support" and event.actor == "system:oidc-sign-in"


def test_a_role_an_admin_granted_by_hand_stays_whatever_the_claim_says(route):
    user = sign_in(["grader"]).user
    factories.accounts.role_grant(actor=factories.TEST_ACTOR, user=user, role="auditor", route=route)
    sign_in([])
    assert grants(user) == {("auditor", "it-support", "manual")}


def test_a_person_is_found_by_subject_even_when_their_username_changes(db):
    user = sign_in(["grader"]).user
    assert sign_in(["grader"], username="ada.lovelace").user == user


def test_an_account_prepared_by_an_admin_is_linked_at_the_first_sign_in(route):
    member = factories.accounts.member_add(
        actor=factories.TEST_ACTOR, route=route, username="ada", role="reader", email="ada@example.org"
    ).user
    assert sign_in([]).user == member
    assert grants(member) == {("reader", "it-support", "manual")}


def test_a_provider_username_never_takes_over_an_account_with_a_local_password(db):
    factories.make_user("ada", "admin")
    with pytest.raises(Conflict):
        sign_in(["admin"])
    assert not Identity.objects.exists()


def test_a_deactivated_person_cannot_sign_in(db):
    user = sign_in([]).user
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(Conflict):
        sign_in([])


def test_people_the_provider_no_longer_knows_are_deactivated_in_one_command(db, tmp_path, settings):
    settings.OIDC_ISSUER = ISSUER
    kept = sign_in([], sub="s-kept", username="kept").user
    gone = sign_in([], sub="s-gone", username="gone").user
    known = tmp_path / "known.txt"
    known.write_text("s-kept\n")
    call_command("oidc_deactivate_unknown", "--known", str(known))
    kept.refresh_from_db(), gone.refresh_from_db()
    assert kept.is_active and not gone.is_active
    event = AuditEvent.objects.get(action="user_deactivated")
    assert event.payload["is_active"] == {"old": True, "new": False} and event.object_id == str(gone.pk)


def test_people_not_seen_for_the_given_days_are_deactivated(db, settings):
    settings.OIDC_ISSUER = ISSUER
    user = sign_in([]).user
    Identity.objects.update(last_sign_in_at=timezone.now() - timedelta(days=100))
    call_command("oidc_deactivate_unknown", "--not-seen-days", "90")
    user.refresh_from_db()
    assert not user.is_active


def test_an_empty_export_deactivates_nobody(db, tmp_path, settings):
    settings.OIDC_ISSUER = ISSUER
    sign_in([])
    empty = tmp_path / "known.txt"
    empty.write_text("")
    with pytest.raises(CommandError):
        call_command("oidc_deactivate_unknown", "--known", str(empty))
    assert User.objects.get(username="ada").is_active


def test_local_passwords_are_hidden_and_refused_when_local_login_is_off(db, client, settings):
    factories.make_user("ada", "reader")
    settings.OIDC_ISSUER = ISSUER
    settings.OIDC_CLIENT_ID = "console"
    settings.LOCAL_LOGIN = False
    page = client.get("/accounts/login/").content.decode()
    assert 'name="password"' not in page and "/accounts/oidc/login/" in page
    response = client.post("/accounts/login/", {"username": "ada", "password": "pw-12345678"})
    assert response.status_code == 403
    assert client.get("/").status_code == 302


def test_sessions_opened_with_a_password_end_when_local_login_is_switched_off(db, client, settings):
    client.force_login(factories.make_user("ada", "reader"), backend="console.accounts.backends.LocalPasswordBackend")
    assert client.get("/").status_code == 200
    settings.OIDC_ISSUER = ISSUER
    settings.LOCAL_LOGIN = False
    assert client.get("/").status_code == 302


def test_local_passwords_stay_while_no_provider_is_configured(db, client, settings):
    factories.make_user("ada", "reader")
    settings.LOCAL_LOGIN = False
    page = client.get("/accounts/login/").content.decode()
    assert 'name="password"' in page and "/accounts/oidc/" not in page
    assert client.post("/accounts/login/", {"username": "ada", "password": "pw-12345678"}).status_code == 302


def test_the_provider_pages_are_not_found_while_no_provider_is_configured(db, client):
    assert client.get("/accounts/oidc/login/").status_code == 404
    assert client.post("/accounts/oidc/backchannel-logout/", {"logout_token": "x"}).status_code == 404


def test_admins_see_who_has_which_role_and_can_export_it_as_csv(client, route, django_assert_max_num_queries):
    client.force_login(factories.make_user("boss", "admin"))
    factories.make_user("@sum", "reader", route)
    sign_in(["grader"])
    with django_assert_max_num_queries(12):
        page = client.get("/workspace/roles/").content.decode()
    assert "From the identity provider" in page and "it-support" in page
    rows = client.get("/workspace/roles.csv").content.decode().splitlines()
    assert rows[0] == "username,email,active,role,route,source,granted_at"
    assert any(row.startswith("ada,,yes,grader,*,provider,") for row in rows)
    assert any(row.startswith("'@sum,") for row in rows)  # a formula is written as text


def test_only_admins_see_the_roles_overview(client, route):
    client.force_login(factories.make_user("rita", "reader", route))
    assert client.get("/workspace/roles/").status_code == 403
    assert client.get("/workspace/roles.csv").status_code == 403


def test_a_back_channel_logout_ends_the_persons_sessions_and_audits_each(db, client):
    from django.contrib.sessions.models import Session

    from console.accounts.identity.services import provider_session_record, provider_sessions_end
    from console.accounts.models import UserSession

    signed = sign_in(["reviewer"])
    client.force_login(signed.user)
    key = client.session.session_key
    provider_session_record(identity=signed.identity, session_key=key, sid="sid-1")
    assert provider_sessions_end(issuer=ISSUER, subject="s-other", sid="sid-1") == 0  # someone else's sid
    assert provider_sessions_end(issuer=ISSUER, subject="s-ada", sid="sid-1") == 1
    assert not Session.objects.filter(session_key=key).exists()
    assert not UserSession.objects.filter(session_key=key).exists()
    event = AuditEvent.objects.filter(action="session_ended").get()
    assert event.actor == "system:oidc-backchannel-logout" and event.object_id == str(signed.user.pk)
    assert event.payload["ended_at"]["old"] is None and key not in str(event.payload)
    assert provider_sessions_end(issuer=ISSUER, subject="s-ada", sid="sid-1") == 0  # nothing left, nothing audited
    assert AuditEvent.objects.filter(action="session_ended").count() == 1


def test_deactivating_a_person_ends_every_session_of_theirs_password_ones_too(db, client, settings):
    from django.contrib.sessions.models import Session

    settings.OIDC_ISSUER = ISSUER
    signed = sign_in(["reviewer"])
    client.force_login(signed.user)  # a session the provider did not open (no ProviderSession row)
    key = client.session.session_key
    Identity.objects.update(last_sign_in_at=timezone.now() - timedelta(days=100))
    call_command("oidc_deactivate_unknown", "--not-seen-days", "90")
    assert not Session.objects.filter(session_key=key).exists()
