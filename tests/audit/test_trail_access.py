"""Audit sits below accounts: it asks who may read the trail through audit/hooks.py."""

import pytest

from audit import hooks
from console.accounts import permissions


def test_accounts_tells_the_trail_who_may_read_it():
    access = hooks.trail_access()
    assert access.can_read_trail is permissions.can_read_audit
    assert access.can_read_history is permissions.can_read_stats
    assert access.trail_readers == tuple(permissions.AUDIT_READERS)
    assert access.history_readers == tuple(permissions.STATS_READERS)


def test_without_accounts_the_trail_refuses_to_guess_who_may_read_it(monkeypatch):
    monkeypatch.setattr(hooks, "_trail_access", [])
    with pytest.raises(RuntimeError, match="access checks"):
        hooks.trail_access()
