"""The cutoff a trial compares the current gate at.

Trials sit below governance, which signs cutoffs, so governance registers a provider here from its
AppConfig.ready(): `provider(route) -> (cutoff, "policy vN") | None`. Without a provider, or when
no policy is in force, the current gate is judged at each decision's logged cutoff.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LOGGED = "logged"
_providers: list[Callable[[Any], tuple[float, str] | None]] = []


def register_cutoff_in_force(provider: Callable[[Any], tuple[float, str] | None]) -> None:
    if provider not in _providers:
        _providers.append(provider)


def cutoff_in_force(route) -> tuple[float | None, str]:
    for provider in _providers:
        found = provider(route)
        if found is not None:
            return found
    return None, LOGGED
