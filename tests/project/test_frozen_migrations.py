"""Migrations are history: what they do may not change when the application's code does.

A migration that imports the application (the partition SQL of console/core, the ledger's
compression, a model's field class) runs whatever that code says today, so editing the code would
silently change what a fresh database gets, and no longer match the databases migrated before. The
SQL and helpers a migration needs are frozen beside it, in modules whose names start with an
underscore (Django's loader skips them): `console/ledger/migrations/_partitions_v1.py`,
`_compression_v1.py`, `_fields_v1.py`. They may import one another and lower apps' frozen modules,
never the application. docs/architecture.md ("Migrations are frozen") says how to change one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection

from tests.project.test_import_rule import LAYERS

ROOT = Path(__file__).resolve().parents[2]
APPLICATION = ("console", "grading", "audit")
# A module of a migrations package: another migration, or a frozen helper.
_MIGRATIONS_MODULE = re.compile(r"^(?P<app>console\.\w+|grading|audit)\.migrations(\.|$)")

# Migrations that reach into an upper app's tables, which ran long ago and cannot be changed in
# effect (docs/architecture.md, "Migrations are frozen", says why each is historical). No other
# migration may: an app's migrations change its own tables and read those of apps below it.
REACHES_UP = {
    # Partitioning the decisions replaced the foreign keys six upper apps held to ledger_decision
    # by reference-check triggers on their tables (it depends on their migrations to find them).
    ("ledger", "0007_monthly_partitions"),
    # accounts' role grants named their route `ledger.Route` before the route moved down beside them
    # (accounts 0005 moved it in state only; the table is still `ledger_route`).
    ("accounts", "0001_initial"),
}


def _migration_files() -> list[Path]:
    folders = [*(ROOT / "console").glob("*/migrations"), ROOT / "grading" / "migrations", ROOT / "audit" / "migrations"]
    return sorted(path for folder in folders for path in folder.glob("*.py") if path.name != "__init__.py")


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def imported_modules(source: str, module: str) -> set[str]:
    """Every module `source` imports: at the top, inside functions, relative ones resolved, and
    `importlib.import_module` / `__import__` of a constant name."""
    package = module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            # `from package import name` may name a module of the package
            found.update(f"{base}.{alias.name}" for alias in node.names if _MIGRATIONS_MODULE.match(base))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def _layer_of_module(module: str) -> int:
    for index, layer in enumerate(LAYERS):
        if any(module == app or module.startswith(app + ".") for app in layer):
            return index
    raise KeyError(module)


def application_imports(source: str, module: str) -> list[str]:
    """What `source` (the migration module `module`) imports of the application: anything of the
    project outside a migrations package, and a migrations package of a higher app."""
    problems = []
    for name in sorted(imported_modules(source, module)):
        if name.split(".")[0] not in APPLICATION:
            continue  # Django, the standard library, a third-party library
        match = _MIGRATIONS_MODULE.match(name)
        if match is None:
            problems.append(f"{module} imports the application: {name}")
        elif _layer_of_module(match["app"]) > _layer_of_module(module):
            problems.append(f"{module} imports the migrations of a higher app: {name}")
    return problems


def test_no_migration_imports_the_application():
    problems = []
    for path in _migration_files():
        problems += application_imports(path.read_text(), _module_of(path))
    assert problems == []


@pytest.mark.parametrize(
    "source",
    [
        "from console.core import partitions",
        "import console.ledger.models",
        "def f():\n    from console.ledger.compression import decompress_text",
        "from ..compression import compress_text",
        "import importlib\nimportlib.import_module('console.ledger.selectors')",
        "from console.ledger.migrations import _partitions_v1\nfrom grading.migrations import _x",
    ],
)
def test_the_checker_catches_a_migration_importing_the_application(source):
    assert application_imports(source, "console.ledger.migrations.0099_new")


def test_the_checker_lets_a_migration_import_frozen_helpers_and_libraries():
    source = (
        "import importlib\nimport numpy\nfrom django.db import migrations\n"
        "from console.ledger.migrations import _partitions_v1\nfrom . import _fields_v1\n"
        "importlib.import_module('console.ledger.migrations.0005_route_score_counts')"
    )
    assert application_imports(source, "console.verification.migrations.0099_new") == []


def _layer_of_label(label: str) -> int | None:
    try:
        return _layer_of_module(apps.get_app_config(label).name)
    except (LookupError, KeyError):
        return None  # Django's own apps


def upward_reaches(source: str, label: str) -> list[str]:
    """How the migration `source` of app `label` reaches an app above it: a dependency on its
    migrations, a model reference to it, or SQL naming one of its tables."""
    own = _layer_of_label(label)
    higher = {
        other.label
        for other in apps.get_app_configs()
        if (layer := _layer_of_label(other.label)) is not None and layer > own
    }
    tables = {
        model._meta.db_table: model._meta.app_label for model in apps.get_models() if model._meta.app_label in higher
    }
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text = node.value
        if text in higher:  # ("app", "0001_initial") in dependencies
            found.append(f"depends on {text}")
        if (reference := re.fullmatch(r"(\w+)\.\w+", text)) and reference[1] in higher:
            found.append(f"refers to {text}")
        found += [f"names {table} ({app})" for table, app in tables.items() if re.search(rf"\b{table}\b", text)]
    return found


def test_no_new_migration_reaches_into_a_higher_apps_tables():
    reaching = {}
    for path in _migration_files():
        if path.name.startswith("_"):
            continue
        label = apps.get_containing_app_config(_module_of(path)).label
        if (found := upward_reaches(path.read_text(), label)) and (label, path.stem) not in REACHES_UP:
            reaching[f"{label}.{path.stem}"] = found
    assert reaching == {}


def test_the_migrations_allowed_to_reach_up_still_do():
    """The allowlist holds only what is needed: an entry whose migration no longer reaches up goes."""
    for label, name in sorted(REACHES_UP):
        path = Path(apps.get_app_config(label).path) / "migrations" / f"{name}.py"
        assert upward_reaches(path.read_text(), label), (label, name)


@pytest.mark.parametrize(
    "source",
    [
        "dependencies = [('ledger', '0001_initial'), ('grading', '0003_label_decision_copies')]",
        "field = models.ForeignKey(on_delete=models.CASCADE, to='disputes.dispute')",
        "SQL = 'ALTER TABLE grading_finallabel DROP CONSTRAINT x'",
    ],
)
def test_the_checker_catches_a_lower_migration_reaching_up(source):
    assert upward_reaches(source, "ledger")


def _functions(sql: str) -> dict[str, str]:
    """name -> body of each `CREATE OR REPLACE FUNCTION name(...) ... $fn$body$fn$` in `sql`."""
    return dict(re.findall(r"FUNCTION (\w+)\(.*?\$fn\$(.*?)\$fn\$", sql, re.DOTALL))


def test_the_functions_the_migrations_installed_are_the_live_definitions(db):
    """The live partition SQL (which new code reads and a new frozen module copies) says what the
    database runs: editing it without a migration that installs it fails here."""
    from console.core import partitions
    from console.ledger import partitions as ledger_partitions

    live = {
        **_functions(partitions.ENSURE_FUNCTION),
        **_functions(partitions.REFERENCE_CHECK_FUNCTION),
        **_functions(ledger_partitions.MONTH_REFERENCE_FUNCTIONS),
    }
    assert len(live) == 4
    with connection.cursor() as cursor:
        cursor.execute("SELECT proname, prosrc FROM pg_proc WHERE proname = ANY(%s)", [list(live)])
        installed = dict(cursor.fetchall())
    assert installed == live
