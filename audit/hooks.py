"""Hook points of the audit trail for the apps above it.

Audit is the lowest app but `core`: every service of every other app records its events here, in
its own transaction, so audit imports none of them back. Two things audit needs from above come in
through hooks registered from the other apps' AppConfig.ready():

- what audit wants said to people (a broken chain): a listener the notification app registers;
- who may read the trail, and who the admins are (`TrailAccess`): accounts registers it, as every
  permission check lives there (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

AdminNotice = Callable[..., None]
_admin_notices: list[AdminNotice] = []


def register_admin_notice(listener: AdminNotice) -> None:
    """`listener(recipients=[...], subject=..., body=...)` is called, inside the transaction that
    records what it is about, whenever audit has something to tell the console's admins."""
    if listener not in _admin_notices:
        _admin_notices.append(listener)


def admins_notify(*, recipients: list[str], subject: str, body: str) -> None:
    for listener in _admin_notices:
        listener(recipients=recipients, subject=subject, body=body)


@dataclass(frozen=True)
class TrailAccess:
    """How audit's pages and API ask who may read what, without importing accounts."""

    # The user may read, verify and export the trail (of their routes).
    can_read_trail: Callable[[Any], bool]
    # The user may read the history (grades, labels, actions) of the decisions on their routes: the
    # roles that read statistics, not every decision reader (a `reader` sees refusals, not grades).
    can_read_history: Callable[[Any], bool]
    # route_slugs(user, roles): slugs of the routes where the user holds one of `roles`; None is all.
    route_slugs: Callable[[Any, Iterable[str]], set[str] | None]
    trail_readers: tuple[str, ...]
    history_readers: tuple[str, ...]
    # The e-mail addresses of the console's admins, told of a broken chain.
    admin_addresses: Callable[[], list[str]]


_trail_access: list[TrailAccess] = []


def register_trail_access(access: TrailAccess) -> None:
    _trail_access[:] = [access]


def trail_access() -> TrailAccess:
    if not _trail_access:
        # Fail closed and loudly: without it nobody could be told apart from an auditor.
        raise RuntimeError("no app registered the audit trail's access checks (console.accounts does)")
    return _trail_access[0]
