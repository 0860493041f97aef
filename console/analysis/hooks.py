"""Panels shown beside the operating-point table by apps above analysis, which analysis may not
import: each registers `fn(route, cutoffs) -> {"template", "context"} | None` from its
AppConfig.ready(). Disputes shows its per-band counts here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SidePanel = Callable[[Any, list[float]], dict[str, Any] | None]
_side_panels: list[SidePanel] = []


def register_side_panel(fn: SidePanel) -> None:
    if fn not in _side_panels:
        _side_panels.append(fn)


def side_panels(route, cutoffs: list[float]) -> list[dict[str, Any]]:
    """Every registered panel that has something to show for `route` at `cutoffs`."""
    return [panel for fn in _side_panels if (panel := fn(route, cutoffs)) is not None]
