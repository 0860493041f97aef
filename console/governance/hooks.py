"""What apps above governance do when a signature takes a version out of force.

Monitoring keeps rechecks and alarms against the version in force; governance may not import it,
so monitoring registers a handler here from its AppConfig.ready(). Handlers run inside the signing
transaction, after the superseded version's own audit event, and write their audit events there:
a signature and what it resolves commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_on_supersede: list[Callable[..., Any]] = []


def register_on_supersede(handler: Callable[..., Any]) -> None:
    """`handler(actor=, user=, superseded=, by=)`: `superseded` just left force, `by` replaces it."""
    if handler not in _on_supersede:
        _on_supersede.append(handler)


def policy_superseded(*, actor, user, superseded, by) -> None:
    for handler in _on_supersede:
        handler(actor=actor, user=user, superseded=superseded, by=by)
