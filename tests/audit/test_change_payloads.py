"""One shape for every audited change, {"<field>": {"old", "new"}}, and an audit page that still
reads the events written in the earlier shape (the trail is append-only: they keep theirs)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.test import Client

from audit.changes import changes_of, field_changes, is_legacy
from audit.models import Action, AuditEvent
from audit.services import Actor, audit_record
from console.accounts import services as accounts_services
from grading.services import pool as pool_services
from tests.factories import make_user

ROOT = Path(__file__).resolve().parents[2]
CODE = [ROOT / "console", ROOT / "grading", ROOT / "audit"]


def test_a_creation_is_each_field_from_none_and_a_deletion_each_field_to_none():
    assert field_changes(new={"name": "Billing", "graders": 2}) == {
        "name": {"old": None, "new": "Billing"},
        "graders": {"old": None, "new": 2},
    }
    assert field_changes(old={"verdict": "correct"}) == {"verdict": {"old": "correct", "new": None}}


def test_only_the_fields_that_changed_are_recorded():
    changes = field_changes(
        old={"status": "failed", "error": "HTTP 500", "kind": "http"}, new={"status": "queued", "kind": "http"}
    )
    assert changes == {"status": {"old": "failed", "new": "queued"}, "error": {"old": "HTTP 500", "new": None}}
    assert field_changes(old={"a": 1}, new={"a": 1}) == {}


def test_the_earlier_shape_is_told_apart_from_the_per_field_one():
    assert is_legacy({"old": {"guidelines": ""}, "new": {"guidelines": "x"}})
    assert is_legacy({"objects": {"decision": [1]}, "new": {"verdict": "correct"}})
    assert not is_legacy({"guidelines": {"old": "", "new": "x"}, "objects": {"decision": [1]}})
    assert changes_of({"old": None, "new": {"verdict": "correct"}}) == []
    assert changes_of({"version": 2, "status": {"old": "draft", "new": "active"}}) == [("status", "draft", "active")]


def _payload_dicts(tree: ast.AST):
    """Every dict literal that a call passes as its audit payload: `payload=` (directly, joined with
    `|`, or through a local variable of that name) and EventSpec's fourth argument."""
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)

    def literals(expr: ast.expr):
        if isinstance(expr, ast.Dict):
            yield expr
        elif isinstance(expr, ast.BinOp):
            yield from literals(expr.left)
            yield from literals(expr.right)
        elif isinstance(expr, ast.Name):
            for value in assigned.get(expr.id, []):
                if isinstance(value, ast.Dict):
                    yield value

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        given = [k.value for k in node.keywords if k.arg == "payload"]
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name == "EventSpec" and len(node.args) >= 4:
            given.append(node.args[3])
        for expr in given:
            yield from literals(expr)


def test_no_service_records_a_change_as_one_top_level_old_and_new_pair():
    offenders = []
    for folder in CODE:
        for path in folder.rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for payload in _payload_dicts(ast.parse(path.read_text(), filename=str(path))):
                keys = {k.value for k in payload.keys if isinstance(k, ast.Constant)}
                if keys & {"old", "new"}:
                    offenders.append(f"{path.relative_to(ROOT)}:{payload.lineno}")
    assert offenders == [], "record changes per field with audit.changes.field_changes: " + ", ".join(offenders)


def test_the_guard_would_catch_a_top_level_old_and_new_pair():
    source = 'audit_record(actor=a, action=b, object_type="x", object_id=1, payload={"old": {"a": 1}, "new": None})'
    assert len(list(_payload_dicts(ast.parse(source)))) == 1
    [caught] = _payload_dicts(ast.parse(source))
    assert {k.value for k in caught.keys} == {"old", "new"}


def test_converted_services_record_their_changes_per_field(route):
    admin = Actor.system("tests")
    user = accounts_services.user_ensure(actor=admin, username="newcomer", email="n@example.org")
    accounts_services.role_grant(actor=admin, user=user, role="reader", route=route)
    pool_services.route_guidelines_update(actor=admin, route=route, guidelines="Grade the answer, not the style.")
    created, granted, guidelines = (
        AuditEvent.objects.filter(action=action).order_by("-seq").first().payload
        for action in (Action.USER_CREATED, Action.ROLE_GRANTED, Action.ROUTE_UPDATED)
    )
    assert created == {"username": {"old": None, "new": "newcomer"}}
    assert granted == {"role": {"old": None, "new": "reader"}, "route": "it-support", "username": "newcomer"}
    assert guidelines["guidelines"]["new"] == "Grade the answer, not the style."
    for payload in (created, granted, guidelines):
        assert not is_legacy(payload)


@pytest.fixture
def auditor_page(route):
    client = Client()
    client.force_login(make_user("shape-auditor", "auditor"))
    return client


def test_the_audit_page_shows_an_event_of_each_shape(db, auditor_page):
    # One event as services wrote it before the shape was one (stored, so never rewritten) ...
    audit_record(
        actor=Actor.system("tests"),
        action=Action.ROUTE_UPDATED,
        object_type="route",
        object_id="legacy-route",
        payload={"old": {"guidelines": "Old rules."}, "new": {"guidelines": "Newer rules."}},
    )
    # ... and one as they write it now.
    audit_record(
        actor=Actor.system("tests"),
        action=Action.ROUTE_UPDATED,
        object_type="route",
        object_id="current-route",
        payload={"slug": "current-route", "graders_per_item": {"old": 2, "new": 3}, "name": {"old": None, "new": "B"}},
    )
    page = auditor_page.get("/audit/?object=route:legacy-route").content.decode()
    assert '<ul class="changes">' not in page  # shown as stored, as it always was
    assert "&quot;old&quot;: {" in page and "Newer rules." in page
    page = auditor_page.get("/audit/?object=route:current-route").content.decode()
    assert (
        '<ul class="changes"><li><span class="mono">graders_per_item</span>: <span class="value">2</span> → '
        '<span class="value">3</span></li><li><span class="mono">name</span>: <span class="muted">none</span> → '
        '<span class="value">B</span></li></ul>'
    ) in page
    assert "&quot;slug&quot;: &quot;current-route&quot;" in page  # the context stays in the payload


def test_a_long_value_is_cut_on_the_page_and_whole_in_the_payload(db, auditor_page):
    text = "Grade <b>carefully</b>. " * 20
    audit_record(
        actor=Actor.system("tests"),
        action=Action.ROUTE_UPDATED,
        object_type="route",
        object_id="long",
        payload={"guidelines": {"old": "", "new": text}},
    )
    page = auditor_page.get("/audit/?object=route:long").content.decode()
    assert "Grade &lt;b&gt;carefully&lt;/b&gt;. Grade" in page and "<b>carefully</b>" not in page
    assert page.count("…</span>") == 1


def test_a_dispute_taken_and_resolved_before_the_per_field_shape_reads_beside_one_taken_now(db, auditor_page):
    # As dispute_assigned and dispute_resolved were stored before they were recorded per field ...
    for action, payload in (
        (Action.DISPUTE_ASSIGNED, {"to": "reviewer", "before": None}),
        (Action.DISPUTE_RESOLVED, {"resolution": "upheld", "note": "The passage does not say it."}),
    ):
        audit_record(actor=Actor.system("tests"), action=action, object_type="dispute", object_id=7, payload=payload)
    # ... and as they are recorded now.
    audit_record(
        actor=Actor.system("tests"),
        action=Action.DISPUTE_RESOLVED,
        object_type="dispute",
        object_id=8,
        payload=field_changes(
            old={"status": "open", "resolution_note": "", "resolved_by": None},
            new={"status": "overturned", "resolution_note": "Passage 1 says how.", "resolved_by": "reviewer"},
        ),
    )
    earlier = auditor_page.get("/audit/?object=dispute:7").content.decode()
    assert '<ul class="changes">' not in earlier  # shown as stored, in the payload
    assert "&quot;to&quot;: &quot;reviewer&quot;" in earlier and "The passage does not say it." in earlier
    now = auditor_page.get("/audit/?object=dispute:8").content.decode()
    assert (
        '<li><span class="mono">status</span>: <span class="value">open</span> → '
        '<span class="value">overturned</span></li>'
    ) in now
