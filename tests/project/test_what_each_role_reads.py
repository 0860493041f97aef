"""Every page and every API read, walked as each role, by session and by token: what a role may not
read never appears.

The routes come from the URLconf (every GET the console answers, pages and API alike), filled from
the demo workspace, so a new read is walked without anyone listing it. The table the walk holds each
role to is README's "What each role reads" (`NEVER_READS` below, row for row):

- a `reader` (support agents) reads refusals and their disputes, and never a grade: no grader's name
  and no `verdict`, `label`, `grades` or `labels` key in any answer;
- a `grader` reads the blind queue only: no gate score, outcome or policy in any answer, and every
  API outside the queue and its guidelines refuses them;
- an `integrator`, a `reviewer` and a `policy_owner` never read the audit trail beyond a decision's
  history (its list, verify and export refuse them), nor the admins' pages;
- an appellant's message and address reach the route's reviewers, policy owners and admins only;
- an `auditor` exports the trail of their own routes only, and never reads the admins' pages;
- an `admin` reads everything, the whole trail included;
- nobody reads a password hash or another person's token key, and nobody signed out reads anything
  but the sign-in page, health and the appeal page.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern

from console.accounts.models import ApiToken, Route, UserSession
from console.disputes.models import Dispute
from console.disputes.services import appeal_open
from console.governance.models import PolicyVersion
from console.ledger.models import Decision
from console.monitoring.models import Alarm, Recheck
from grading.models import Grade, GradingItem
from tests import factories
from tests.grading.helpers import api_client, grade, next_item

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

SLUG = "it-support"
PASSWORD = "pw-12345678"
# Reads that stream, sign out, or belong to Django's admin (staff only, walked elsewhere).
SKIPPED = re.compile(r"^(admin/|accounts/logout|api/v1/audit/export|static/|healthz)")  # health: no broker here
ROLES = ("reader", "grader", "integrator", "reviewer", "policy_owner", "auditor", "admin")
# README, "What each role reads": what each role never reads, as this walk checks it.
NEVER_READS = {
    "reader": {"grades", "trail", "admin_pages", "appellant"},
    "grader": {"gate", "trail", "admin_pages", "appellant"},
    "integrator": {"trail", "admin_pages", "appellant"},
    "reviewer": {"trail", "admin_pages"},
    "policy_owner": {"trail", "admin_pages"},
    "auditor": {"other_routes_trail", "admin_pages", "appellant"},
    "admin": set(),
}
TRAIL = ("/audit/", "/api/v1/audit/events", "/api/v1/audit/verify")  # and the export, read apart
ADMIN_PAGES = ("/workspace/", "/workspace/roles/", "/routes/new/", f"/routes/{SLUG}/settings/", "/tokens/", "/outbox/")
APPEAL_MESSAGE = "My contract renewal question was refused twice; zebra-quartz-appeal."
APPEAL_EMAIL = "appellant-zq@example.org"
GRADE_KEYS = {"verdict", "label", "grades", "labels"}
GATE_KEYS = {"gate", "score", "outcome", "cutoff", "policy"}


def _gets() -> list[str]:
    found = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            text = str(entry.pattern)
            if isinstance(entry.pattern, RegexPattern):
                text = text.removeprefix("^").removesuffix("$")
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + text)
            elif isinstance(entry, URLPattern):
                view_class = getattr(entry.callback, "cls", None)
                if view_class is None or hasattr(view_class, "get"):
                    found.append(prefix + text)

    walk(get_resolver().url_patterns, "")
    return [p for p in found if not SKIPPED.match(p)]


def _fill(pattern: str, values: dict[str, Any]) -> str:
    path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(values.get(m.group(1), 1)), pattern)
    return "/" + path.replace("^", "").replace("$", "")


@pytest.fixture
def world(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    call_command("load_demo", "--decisions", "60", "--no-logins")
    route = Route.objects.get(slug=SLUG)
    # Graders with names no page should show a reader: two grade the same items, apart and alike.
    graders = [api_client(factories.make_user(f"gwen-grader-{i}", "grader")) for i in range(2)]
    for _ in range(4):
        item = next_item(graders[0], SLUG)
        while item is not None and next_item(graders[1], SLUG)["id"] != item["id"]:
            item = next_item(graders[0], SLUG)
        if item is not None:
            grade(graders[0], item["id"], "correct")
            grade(graders[1], item["id"], "incorrect" if _ % 2 else "correct")
    refused = Decision.objects.filter(route=route, outcome="refused").order_by("pk").first()
    graded = GradingItem.objects.filter(route=route, grades__isnull=False).first()
    values = {
        "slug": SLUG,
        "pk": refused.pk,
        "decision_id": refused.pk,
        "request_id": refused.request_id,
        "item_id": graded.public_id if graded else "none",
        "graded_decision": graded.decision_id,
        "policy_id": PolicyVersion.objects.filter(route=route).order_by("pk").values_list("pk", flat=True).first(),
        "dispute_id": Dispute.objects.filter(route=route).values_list("pk", flat=True).first() or 1,
        "recheck_id": Recheck.objects.values_list("pk", flat=True).first() or 1,
        "alarm_id": Alarm.objects.values_list("pk", flat=True).first() or 1,
    }
    graders = set(Grade.objects.values_list("grader__username", flat=True))
    assert graders, "the demo grades something"
    # An appeal on the walked route, in words and an address no other row holds.
    appeal_open(route=route, request_id=refused.request_id, message=APPEAL_MESSAGE, email=APPEAL_EMAIL)
    values["dispute_id"] = Dispute.objects.get(route=route, kind="appeal").pk
    return values, graders


def _as(role: str | None, credential: str = "session") -> Client:
    """A client of a new person holding `role` on the walked route, signed in or sending a token."""
    if role is None:
        return Client()
    user = factories.make_user(f"reads-{role}-{credential}", role, Route.objects.get(slug=SLUG))
    if credential == "token":
        return Client(HTTP_AUTHORIZATION=f"Token {factories.make_token(user)}")
    client = Client()
    client.force_login(user)
    return client


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


# Reads whose query string opens another view of the same route (the URLconf does not list them).
WITH_QUERIES = [
    "/api/v1/audit/events?object=decision:{graded_decision}",
    "/decisions/{graded_decision}/",
    "/api/v1/decisions/{graded_decision}",
    "/refusals/?outcome=refused",
]


def _read_all(client: Client, values: dict[str, Any], *, api_only: bool = False):
    paths = [_fill(pattern, values) for pattern in _gets()] + [q.format(**values) for q in WITH_QUERIES]
    for path in paths:
        if api_only and not path.startswith("/api/"):
            continue  # a token opens the API only; pages answer it as signed out
        response = client.get(path)
        assert response.status_code < 500, (path, response.status_code)
        if response.status_code == 200 and not response.streaming:
            yield path, response


def _export(client: Client) -> tuple[int, list[dict]]:
    response = client.get("/api/v1/audit/export")
    if response.status_code != 200:
        return response.status_code, []
    return 200, [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


@pytest.mark.parametrize("credential", ["session", "token"])
@pytest.mark.parametrize("role", ROLES)
def test_each_role_reads_what_the_readmes_table_says_and_nothing_more(world, role, credential):
    values, graders = world
    never = NEVER_READS[role]
    client = _as(role, credential)
    secrets = {factories.make_token(factories.make_user(f"someone-{role}-{credential}", "reviewer"))}
    read: dict[str, str] = {}
    for path, response in _read_all(client, values, api_only=credential == "token"):
        text = response.content.decode("utf-8", "replace")
        read[path] = text
        assert not [s for s in secrets if s in text], f"{path} shows the {role} another person's token key"
        assert "md5$" not in text and "pbkdf2_sha256$" not in text, f"{path} shows the {role} a password hash"
        is_json = response["Content-Type"].startswith("application/json")
        if "grades" in never:
            named = [g for g in graders if re.search(rf"\b{re.escape(g)}\b", text)]
            assert not named, f"{path} shows the grader(s) {named} to a {role}"
            assert not (is_json and _keys(json.loads(text)) & GRADE_KEYS), f"{path} gives the {role} a grade"
        if "gate" in never and is_json and path.startswith("/api/"):
            leaked = _keys(json.loads(text)) & GATE_KEYS
            assert not leaked, f"{path} gives the {role} {leaked}"
        if "appellant" in never:
            assert APPEAL_MESSAGE not in text and APPEAL_EMAIL not in text, f"{path} shows the {role} the appellant"
    if "trail" in never:
        opened = [path for path in TRAIL if path in read]
        opened += ["/api/v1/audit/export"] if _export(client)[0] == 200 else []
        assert not opened, f"the {role} reads the audit trail at {opened}"
    if "admin_pages" in never:
        opened = [path for path in ADMIN_PAGES if path in read]
        assert not opened, f"the {role} reads the admins' pages {opened}"
    # What the table gives each role, so that the checks above are not blind.
    if role == "reader":
        assert len(read) >= (10 if credential == "session" else 5)  # refusals, disputes and their pages
    if "appellant" not in never:
        dispute = f"/api/v1/disputes/{values['dispute_id']}"
        assert APPEAL_MESSAGE in read[dispute] and APPEAL_EMAIL in read[dispute]
    if role in ("auditor", "admin"):
        status, events = _export(client)
        routes = {event["route"] for event in events}
        assert status == 200 and SLUG in routes
        if "other_routes_trail" in never:
            assert routes == {SLUG}, f"an auditor of {SLUG} exports events of {routes - {SLUG}}"
        else:
            assert "hr-policy" in routes and None in routes  # every route's, and the global events
    if role == "grader":
        # No API read answers a grader but the schema (the queue's reads are POSTs); the page is the queue.
        assert {path for path in read if path.startswith("/api/")} <= {"/api/schema/", "/api/docs/"}
        assert credential == "token" or "/grading/" in read


def test_the_walk_would_see_a_grade_where_one_is_shown(world):
    """The reader's check is not blind: a reviewer reads the same history and sees the graders."""
    values, graders = world
    shown = _as("reviewer").get(WITH_QUERIES[0].format(**values)).content.decode()
    assert any(g in shown for g in graders) and '"verdict"' in shown


def test_signed_out_nothing_is_read_but_sign_in_health_and_the_appeal_page(world):
    values, _graders = world
    allowed = re.compile(r"^/(healthz|accounts/login/|api/schema/|api/docs/|appeal/)")
    for path, _response in _read_all(_as(None), values):
        assert allowed.match(path), f"{path} answers 200 to nobody"


@pytest.mark.parametrize("role", ["reader", "grader", "auditor", "integrator", "reviewer", "policy_owner", "admin"])
def test_every_role_reads_its_own_security_page_and_nobody_elses_sessions_or_tokens(db, role):
    """The Security page is each person's own: every role reaches it, and it shows their sessions and
    tokens only, never another person's (an admin's included: admins manage tokens on /tokens/)."""
    route = factories.make_route(SLUG, "IT support")
    someone = factories.make_user("someone-else", "reviewer", route)
    factories.make_token(someone)
    Client().force_login(someone)
    UserSession.objects.filter(user=someone).update(user_agent="someone-elses-browser", ip_address="192.0.2.77")
    me = factories.make_user(f"security-{role}", role, route)
    factories.make_token(me)
    browser = Client()
    browser.force_login(me)
    UserSession.objects.filter(user=me).update(user_agent=f"{role}-browser")
    page = browser.get("/accounts/security/")
    text = page.content.decode()
    assert page.status_code == 200
    mine, theirs = (ApiToken.objects.get(user=user).prefix for user in (me, someone))
    assert mine in text and theirs not in text
    assert f"{role}-browser" in text
    assert "someone-elses-browser" not in text and "192.0.2.77" not in text
