"""Outermost services say so: `transaction.atomic(durable=True)` makes Django refuse to run them
inside another transaction, where their commit would not be theirs to make.

The tests' own transaction does not count: pytest-django's `db` fixture opens it the way Django's
TestCase does (`TestCase._enter_atomics`, which marks its blocks `_from_testcase`), and
`Atomic.__enter__` lets a durable block nest in such a block only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.db import transaction

from audit.services import Actor
from console.accounts import services as accounts_services
from console.accounts.models import RoleGrant
from tests.factories import make_user

ROOT = Path(__file__).resolve().parents[2]

# Entry points only: called from views, APIs, tasks or commands, never from another service, a
# hook, the demo or a world the tests build once for many tests.
DURABLE = {
    "console/accounts/services.py": {
        "member_add",
        "role_revoke",
        "tokens_revoke",
        "token_rate_set",
        "route_settings_create",
        "route_settings_update",
    },
    "console/disputes/services.py": {"appeal_link_revoke", "appeal_secret_rotate", "dispute_assign", "dispute_resolve"},
    "console/governance/services.py": {"policy_evidence_recompute", "policy_withdraw"},
    "console/monitoring/services/alarms.py": {"alarm_acknowledge"},
    "console/monitoring/services/evidence.py": {"evidence_refresh_request"},
    "console/notify/services.py": {"preference_set"},
    "console/shadow/services.py": {"shadow_run_retry"},
    "grading/services/labels.py": {"grade_submit", "grade_withdraw", "label_adjudicate"},
    "grading/services/pool.py": {"gold_item_create", "gold_item_remove", "grading_plan_retire"},
    "grading/services/queue.py": {"assignment_claim", "assignment_skip"},
}


def _durable_functions(path: Path) -> set[str]:
    found = set()
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for statement in node.body:
            if isinstance(statement, ast.With):
                for item in statement.items:
                    call = item.context_expr
                    if (
                        isinstance(call, ast.Call)
                        and getattr(call.func, "attr", None) == "atomic"
                        and any(k.arg == "durable" and getattr(k.value, "value", None) is True for k in call.keywords)
                    ):
                        found.add(node.name)
    return found


@pytest.mark.parametrize("module", sorted(DURABLE))
def test_the_outermost_services_open_a_durable_transaction(module):
    assert DURABLE[module] <= _durable_functions(ROOT / module)


def test_a_durable_service_runs_inside_the_tests_own_transaction(db):
    user = make_user("durable-reader", "reader")
    grant = RoleGrant.objects.get(user=user)
    accounts_services.role_revoke(actor=Actor.system("tests"), grant=grant)
    assert not RoleGrant.objects.filter(user=user).exists()


def test_an_outermost_service_refuses_to_run_inside_another_transaction(db):
    grant = RoleGrant.objects.get(user=make_user("durable-nested", "reader"))
    with pytest.raises(RuntimeError, match="durable atomic block cannot be nested"), transaction.atomic():
        accounts_services.role_revoke(actor=Actor.system("tests"), grant=grant)
    assert RoleGrant.objects.filter(pk=grant.pk).exists()
