"""Every page and every API read, walked as each role: what a role may not read never appears.

The routes come from the URLconf (every GET the console answers, pages and API alike), filled from
the demo workspace, so a new read is walked without anyone listing it. The table the walk holds each
role to is README's "What each role reads":

- a `reader` (support agents) reads refusals and their disputes, and never a grade: no grader's name
  and no `verdict`, `label`, `grades` or `labels` key in any answer;
- a `grader` reads the blind queue only: no gate score, outcome or policy in any answer, and every
  API outside the queue and its guidelines refuses them;
- nobody signed out reads anything but the sign-in page, health and the appeal page.
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
    return values, graders


def _as(role: str | None) -> Client:
    client = Client()
    if role is not None:
        user = factories.make_user(f"reads-{role}", role, Route.objects.get(slug=SLUG))
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


def _read_all(client: Client, values: dict[str, Any]):
    paths = [_fill(pattern, values) for pattern in _gets()] + [q.format(**values) for q in WITH_QUERIES]
    for path in paths:
        response = client.get(path)
        assert response.status_code < 500, (path, response.status_code)
        if response.status_code == 200 and not response.streaming:
            yield path, response


def test_a_reader_never_reads_a_grade(world):
    values, graders = world
    read = 0
    for path, response in _read_all(_as("reader"), values):
        text = response.content.decode("utf-8", "replace")
        named = [g for g in graders if re.search(rf"\b{re.escape(g)}\b", text)]
        assert not named, f"{path} shows the grader(s) {named} to a reader"
        if response["Content-Type"].startswith("application/json"):
            leaked = _keys(json.loads(text)) & GRADE_KEYS
            assert not leaked, f"{path} gives a reader {leaked}"
        read += 1
    assert read >= 10  # the reader does read refusals, disputes and their pages


def test_the_walk_would_see_a_grade_where_one_is_shown(world):
    """The reader's check is not blind: a reviewer reads the same history and sees the graders."""
    values, graders = world
    shown = _as("reviewer").get(WITH_QUERIES[0].format(**values)).content.decode()
    assert any(g in shown for g in graders) and '"verdict"' in shown


def test_a_grader_never_reads_a_gate_score_or_an_outcome(world):
    values, _graders = world
    for path, response in _read_all(_as("grader"), values):
        if response["Content-Type"].startswith("application/json") and path.startswith("/api/"):
            leaked = _keys(json.loads(response.content)) & GATE_KEYS
            assert not leaked, f"{path} gives a grader {leaked}"


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
