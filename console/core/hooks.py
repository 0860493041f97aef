"""Reports that apps above core add to /healthz, registered from their AppConfig.ready(): each
answers (ok, details or None). They say what an operator must know about (a broken audit chain)
without taking the console out of service: answering 503 would not mend them, and the console is
what one investigates them with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Report = Callable[[], tuple[bool, dict[str, Any] | None]]
_reports: dict[str, Report] = {}


def register_report(name: str, report: Report) -> None:
    _reports[name] = report


def health_reports() -> dict[str, Report]:
    return dict(_reports)
