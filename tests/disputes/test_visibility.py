"""Who sees what of an appeal: every dispute page and API, read as every role, against the
role-by-field table of docs/disputes.md (the table is the specification; this test reads it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client

from console.disputes.models import Dispute
from tests import factories
from tests.disputes.conftest import client_for

TABLE = Path(__file__).resolve().parents[2] / "docs" / "disputes.md"
ROLES = ("reader", "auditor", "integrator", "reviewer", "policy_owner", "admin", "grader")
MESSAGE = "MY-PRIVATE-MESSAGE about my parental leave"
EMAIL = "asker-private@example.org"
NOTE = "NOTE-FOR-THE-APPELLANT: HR answers leave questions by phone."
HANDLER = "handler-zeta"


def documented_table() -> dict[str, dict[str, str]]:
    lines = TABLE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| field |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return rows


@pytest.fixture
def resolved_appeal(route, decisions):
    cache.clear()
    handler = factories.make_user(HANDLER, "reviewer", route)
    link = client_for(handler).get("/api/v1/routes/it-support/decisions/req-refused/appeal-link").json()["url"]
    assert Client().post(link, {"message": MESSAGE, "email": EMAIL}).status_code == 302
    appeal = Dispute.objects.get(kind="appeal")
    api = client_for(handler)
    assert api.post(f"/api/v1/disputes/{appeal.pk}/assign").status_code == 200
    resolved = api.post(f"/api/v1/disputes/{appeal.pk}/resolve", {"resolution": "upheld", "note": NOTE}, format="json")
    assert resolved.status_code == 200
    return appeal, link


def what_the_role_reads(role: str, route, appeal: Dispute, decision_id: int) -> str:
    user = factories.make_user(f"viewer-{role}", role, None if role == "admin" else route)
    pages = Client()
    pages.force_login(user)
    api = client_for(user)
    responses = [
        pages.get("/disputes/?status=all"),
        pages.get(f"/disputes/{appeal.pk}/"),
        pages.get(f"/decisions/{decision_id}/"),
        api.get("/api/v1/disputes?status=all"),
        api.get(f"/api/v1/disputes/{appeal.pk}"),
    ]
    if role == "grader":
        assert [r.status_code for r in responses] == [403] * 5
    else:
        assert [r.status_code for r in responses] == [200] * 5, role
    return "\n".join(r.content.decode() for r in responses)


def sentinels(appeal: Dispute, link: str) -> dict[str, str]:
    return {
        "appeal exists, its status and outcome": "the refusal stands",
        "appellant's message": MESSAGE,
        "appellant's email": EMAIL,
        "reason given with the outcome": NOTE,
        "names of the review team": HANDLER,
        "the refusal's appeal link": link.rsplit("/", 1)[1],
    }


@pytest.mark.parametrize("role", [*ROLES, "public"])
def test_every_dispute_page_and_api_shows_each_role_what_the_table_says(route, decisions, resolved_appeal, role):
    appeal, link = resolved_appeal
    if role == "public":
        text = Client().get(link).content.decode()
    else:
        text = what_the_role_reads(role, route, appeal, decisions[0])
    table = documented_table()
    assert set(table) == set(sentinels(appeal, link)), "the table and this test name the same fields"
    for field, sentinel in sentinels(appeal, link).items():
        expected = table[field][role]
        if expected == "—":
            continue
        shown = sentinel.lower() in text.lower()
        assert shown == (expected == "yes"), f"{role} {'does not see' if expected == 'yes' else 'sees'} {field!r}"


def test_a_reader_is_told_that_the_message_is_for_the_routes_reviewers(route, decisions, resolved_appeal):
    appeal, _ = resolved_appeal
    user = factories.make_user("agent-2", "reader", route)
    pages = Client()
    pages.force_login(user)
    html = pages.get(f"/disputes/{appeal.pk}/").content.decode()
    assert 'id="appellant-hidden"' in html and re.search(r"Appeal by the person refused", html)
    body = client_for(user).get(f"/api/v1/disputes/{appeal.pk}").json()
    assert body["kind"] == "appeal" and body["status"] == "upheld" and body["outcome"] == "the refusal stands"
    assert body["reason"] is None and body["appellant_email"] is None and body["contact"] is None
