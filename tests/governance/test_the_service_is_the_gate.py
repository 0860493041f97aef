"""The services are the one gate for who may act on a policy version and in which state: called
directly, with no view or API in front, they refuse by themselves; the pages and the API only
map what they raise (and the guard below keeps the checks from creeping back into them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from audit.models import AuditEvent
from audit.services import Actor
from console.core.errors import Conflict, Forbidden, InvalidInput
from console.governance import services
from console.governance.models import PolicyStatus, PolicyVersion
from tests.governance.conftest import draft_body

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def _sign(user, policy: PolicyVersion, **kwargs):
    sha = kwargs.pop("evidence_sha256", policy.evidence_sha256)
    return services.policy_sign(actor=Actor.user(user), user=user, policy=policy, evidence_sha256=sha, **kwargs)


def test_the_service_refuses_a_signature_by_anyone_but_the_named_owner(draft, reviewer, outsider):
    policy = PolicyVersion.objects.get(pk=draft["id"])
    for user in (reviewer.user, outsider.user):
        with pytest.raises(Forbidden):
            _sign(user, policy)
    assert PolicyVersion.objects.get(pk=draft["id"]).status == PolicyStatus.DRAFT
    assert not AuditEvent.objects.filter(action="policy_signed").exists()


def test_the_service_refuses_to_sign_a_version_that_is_no_longer_a_draft(draft, owner):
    policy = PolicyVersion.objects.get(pk=draft["id"])
    _sign(owner.user, policy)
    signed = PolicyVersion.objects.get(pk=draft["id"])
    with pytest.raises(Conflict) as refused:
        _sign(owner.user, signed)
    assert refused.value.code == "not_draft" and refused.value.status == 409
    assert AuditEvent.objects.filter(action="policy_signed").count() == 1


def test_the_service_checks_the_signer_before_what_they_sent_and_that_before_the_state(draft, owner, reviewer):
    policy = PolicyVersion.objects.get(pk=draft["id"])
    with pytest.raises(Forbidden):
        _sign(reviewer.user, policy, evidence_sha256=None, roll_back="yes")
    with pytest.raises(InvalidInput) as missing:
        _sign(owner.user, policy, evidence_sha256="")
    assert missing.value.details[0]["field"] == "evidence_sha256"
    with pytest.raises(InvalidInput) as not_a_boolean:
        _sign(owner.user, policy, roll_back="yes")
    assert not_a_boolean.value.details[0]["field"] == "roll_back"
    with pytest.raises(Conflict) as unread:
        _sign(owner.user, policy, evidence_sha256="0" * 64)
    assert unread.value.code == "evidence_changed"


def test_the_service_refuses_a_draft_by_a_role_that_may_not_draft_whatever_the_body(route, owner, auditor, graded):
    with pytest.raises(Forbidden):
        services.policy_draft(actor=Actor.user(auditor.user), user=auditor.user, route=route, draft={"cutoff": 2})
    assert not PolicyVersion.objects.exists()


def test_the_service_parses_a_body_only_for_who_may_draft(route, owner, reviewer, graded):
    with pytest.raises(InvalidInput) as invalid:
        services.policy_draft(
            actor=Actor.user(reviewer.user), user=reviewer.user, route=route, draft={"cutoff": "high"}
        )
    assert {d["field"] for d in invalid.value.details} >= {"cutoff", "owner"}
    policy = services.policy_draft(actor=Actor.user(reviewer.user), user=reviewer.user, route=route, draft=draft_body())
    assert policy.status == PolicyStatus.DRAFT and policy.version == 1


def test_the_service_refuses_to_withdraw_or_recompute_for_others_and_after_signing(draft, owner, auditor, outsider):
    policy = PolicyVersion.objects.get(pk=draft["id"])
    with pytest.raises(Forbidden):
        services.policy_withdraw(actor=Actor.user(outsider.user), user=outsider.user, policy=policy)
    with pytest.raises(Forbidden):
        services.policy_evidence_recompute(actor=Actor.user(auditor.user), user=auditor.user, policy=policy)
    _sign(owner.user, policy)
    signed = PolicyVersion.objects.get(pk=draft["id"])
    for act in (services.policy_withdraw, services.policy_evidence_recompute):
        with pytest.raises(Conflict) as refused:
            act(actor=Actor.user(owner.user), user=owner.user, policy=signed)
        assert refused.value.code == "not_draft"
    assert PolicyVersion.objects.get(pk=draft["id"]).status == PolicyStatus.ACTIVE


def test_a_page_offers_an_action_exactly_when_its_gate_lets_it_through(draft, owner, reviewer):
    policy = PolicyVersion.objects.get(pk=draft["id"])
    assert services.passes(services.sign_gate, owner.user, policy)
    assert not services.passes(services.sign_gate, reviewer.user, policy)
    assert services.passes(services.withdraw_gate, reviewer.user, policy)  # its author
    _sign(owner.user, policy)
    signed = PolicyVersion.objects.get(pk=draft["id"])
    assert not services.passes(services.sign_gate, owner.user, signed)
    assert not services.passes(services.withdraw_gate, reviewer.user, signed)


def test_a_drafters_policy_in_the_trail_is_a_creation_field_by_field(draft):
    event = AuditEvent.objects.get(action="policy_drafted")
    assert event.payload["version"] == 1
    assert event.payload["status"] == {"old": None, "new": "draft"}
    assert event.payload["cutoff"] == {"old": None, "new": 0.85}
    assert event.payload["owner"] == {"old": None, "new": "owner"}
    assert event.payload["evidence_sha256"] == {"old": None, "new": draft["evidence_sha256"]}
    assert event.payload["as_of"] == {"old": None, "new": draft["as_of"]}
    assert isinstance(event.payload["warnings"], list)


# --- the guard: the checks stay in the services ---------------------------------------------------

_GATED = [ROOT / "console" / "governance" / name for name in ("views.py", "apis.py")]
_DISPUTES = [ROOT / "console" / "disputes" / name for name in ("views.py", "apis.py")]
# The permission checks of governance's actions, and the role names behind them.
_GOVERNANCE_CHECKS = {
    "can_draft_policy",
    "can_sign_policy",
    "can_withdraw_policy",
    "can_recompute_evidence",
    "holds_policy_owner",
    "POLICY_DRAFTERS",
}
_ROLE_NAMES = {"admin", "reviewer", "policy_owner", "auditor", "integrator", "grader", "reader"}
_STATES = {"draft", "active", "superseded", "withdrawn", "needs_recheck"}


def _raised(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            names.add(getattr(call, "id", None) or getattr(call, "attr", ""))
    return names


def _gate_leaks(source: str) -> list[str]:
    """What in a governance view or API module decides who may act, or in which state, by itself."""
    tree = ast.parse(source)
    leaks = [f"raises {name}" for name in sorted(_raised(tree) & {"Forbidden", "Conflict", "PermissionDenied"})]
    for node in ast.walk(tree):
        name = getattr(node, "attr", None) or getattr(node, "id", None)
        if name in _GOVERNANCE_CHECKS or name in {"Role", "has_role", "PolicyStatus"}:
            leaks.append(f"line {node.lineno}: {name}")
        if isinstance(node, ast.Compare):
            for part in [node.left, *node.comparators]:
                if isinstance(part, ast.Constant) and part.value in _ROLE_NAMES | _STATES:
                    leaks.append(f"line {node.lineno}: compares with {part.value!r}")
    return leaks


def test_governance_views_and_apis_leave_permission_and_state_to_the_services():
    leaks = {str(path.relative_to(ROOT)): _gate_leaks(path.read_text()) for path in _GATED}
    assert leaks == {str(path.relative_to(ROOT)): [] for path in _GATED}


def test_dispute_views_and_apis_leave_refusals_to_the_services():
    for path in _DISPUTES:
        assert not _raised(ast.parse(path.read_text())) & {"Forbidden", "PermissionDenied"}, path


def test_the_guard_would_catch_a_check_in_a_view():
    source = (
        "def sign(request, pk):\n"
        "    policy = selectors.get_policy(pk)\n"
        "    if not permissions.can_sign_policy(request.user, policy):\n"
        "        raise Forbidden('no')\n"
        "    if policy.status != 'draft':\n"
        "        raise Conflict('no')\n"
    )
    leaks = _gate_leaks(source)
    assert "raises Forbidden" in leaks and "raises Conflict" in leaks
    assert "line 3: can_sign_policy" in leaks and "line 5: compares with 'draft'" in leaks
