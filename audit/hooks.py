"""Hook points of the audit trail for apps beside it.

The notification app records its own deliveries in the audit trail, so it imports audit; audit
therefore cannot import it back. What audit wants said to people (a broken chain) goes through a
listener that the notification app registers from its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable

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
