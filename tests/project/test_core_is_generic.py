"""`console/core` is the ground floor: it names no app's table and does not import the project's
wiring, so what an app needs of it (partitions, append-only grants, jobs) is declared by the app
(docs/architecture.md, "The floor plan")."""

from __future__ import annotations

import re
from pathlib import Path

from django.apps import apps

from console.core.db_roles import append_only_tables

CORE = Path(__file__).resolve().parents[2] / "console" / "core"


def _project_labels() -> list[str]:
    return sorted(
        config.label
        for config in apps.get_app_configs()
        if config.name.split(".")[0] in ("console", "grading", "audit") and config.label != "core"
    )


def test_core_names_no_apps_table():
    names = re.compile(rf"\b({'|'.join(_project_labels())})_[a-z]")
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(CORE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if names.search(line)
    ]
    assert found == []


def test_core_reaches_celery_through_current_app_not_the_project():
    importing = [path.name for path in sorted(CORE.rglob("*.py")) if "console.celery" in path.read_text()]
    assert importing == []


def test_the_apps_declare_their_append_only_tables():
    assert append_only_tables() == ["audit_auditevent", "ledger_passagedictionary"]


def test_a_job_queued_by_name_finds_the_projects_task():
    """`enqueue("app.task")` looks the name up on celery.current_app, which is the project's app."""
    from celery import current_app

    from console.celery import app

    assert current_app._get_current_object() is app
    current_app.loader.import_default_modules()  # what enqueue does for a name it has not seen yet
    assert current_app.tasks["ledger.passage_dictionary_build"].app is app
