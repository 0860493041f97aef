"""The dependency rule of docs/architecture.md, enforced by reading every import of the code.

Apps form layers; a module may import its own app, any app of a lower layer, and apps of its own
layer, but never an app of a higher layer, and two apps of one layer never lean on each other both
ways (that is a cycle in all but name). `review` sits on top and nothing imports it. No module may
take part in an import cycle, and imports hidden inside functions count like the others.

Imports are not the only arrows: a model names another app's model by a string
(`ForeignKey("ledger.Decision")`, `apps.get_model("grading.Grade")`) and a migration depends on
another app's migrations. Both are read and held to the same rule; the migrations that did
otherwise long ago are allowlisted by name (as tests/project/test_frozen_migrations.py does).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps

ROOT = Path(__file__).resolve().parents[2]

# Lowest first. An app may import apps of its own layer and of every layer below.
LAYERS: list[set[str]] = [
    {"console.core"},
    # The trail is below everyone who writes to it; it asks accounts who may read it through
    # audit/hooks.py (docs/architecture.md).
    {"audit"},
    {"console.accounts", "console.notify"},
    # Route lives in accounts, the ground floor; the ledger's decisions hang from it.
    {"console.ledger"},
    {"console.verification", "console.shadow", "console.similarity"},
    {"grading"},
    {"console.analysis"},
    {"console.trials"},
    {"console.governance"},
    {"console.disputes", "console.monitoring"},
    {"console.review"},
]
# Pure statistics: no Django, and nothing of the project but itself.
PURE = "console.stats"
# The project package itself (settings, urls, celery, run): wires everything, imported by nothing.
PROJECT_MODULES = {
    "console.settings",
    "console.urls",
    "console.api_urls",
    "console.celery",
    "console.wsgi",
    "console.run",
    "console.gunicorn_config",
    "console.beat_guard",
    "console.embedded",
    "console.env",
    # manage.py backup / restore: run before Django starts the embedded database (console/backup.py)
    "console.backup",
    "console",
}


def _layer_of(app: str) -> int:
    for index, layer in enumerate(LAYERS):
        if app in layer:
            return index
    raise KeyError(app)


def _app_of(module: str) -> str | None:
    if module in PROJECT_MODULES:
        return "project"
    for layer in LAYERS:
        for app in layer:
            if module == app or module.startswith(app + "."):
                return app
    if module == PURE or module.startswith(PURE + "."):
        return PURE
    return None


def _source_modules() -> dict[str, Path]:
    modules = {}
    for top in ("console", "grading", "audit"):
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _imports(path: Path, module: str) -> set[str]:
    """Every project module this file imports, at the top or inside functions."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


MODULES = _source_modules()
EDGES = {
    module: {name for name in _imports(path, module) if name in MODULES and name != module}
    for module, path in MODULES.items()
}


def test_every_app_of_the_code_has_a_place_in_the_rule():
    unplaced = sorted({m for m in MODULES if _app_of(m) is None})
    assert not unplaced, f"add these to a layer in tests/project/test_import_rule.py: {unplaced}"


def _violations() -> list[str]:
    problems = []
    for module, targets in EDGES.items():
        source = _app_of(module)
        if source == "project":  # settings and urls wire every app together
            continue
        for target in sorted(targets):
            imported = _app_of(target)
            if imported in (None, source):
                continue
            if source == PURE:
                problems.append(f"{module} -> {target}: console.stats imports nothing of the project")
            elif imported == "project" and target != "console.celery":
                problems.append(f"{module} -> {target}: apps do not import the project wiring")
            elif imported == "console.review":
                problems.append(f"{module} -> {target}: nothing imports console.review")
            elif source not in ("project", PURE) and imported not in ("project", PURE):
                if _layer_of(imported) > _layer_of(source):
                    problems.append(f"{module} -> {target}: {source} may not import the higher {imported}")
    return problems


def test_imports_flow_one_way():
    assert _violations() == []


def test_statistics_never_import_django():
    for module, path in MODULES.items():
        if _app_of(module) == PURE:
            imported = _imports(path, module)
            assert not any(name == "django" or name.startswith("django.") for name in imported), module


def test_no_module_takes_part_in_an_import_cycle():
    # Modules are reduced to the module that defines them: `from pkg import mod` names pkg.mod.
    graph = {m: {t for t in targets if t in MODULES} for m, targets in EDGES.items()}
    for module in graph:  # a package's __init__ importing its own submodules is not a cycle
        graph[module] = {t for t in graph[module] if not t.startswith(module + ".")}
    index, lowlink, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                lowlink[node] = min(lowlink[node], lowlink[target])
            elif target in on_stack:
                lowlink[node] = min(lowlink[node], index[target])
        if lowlink[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize(
    "edge", [("console.ledger.services", "console.shadow.tasks"), ("console.core.jobs", "console.review.views")]
)
def test_the_rule_would_catch_an_upward_import(edge, monkeypatch):
    """The checker itself: an upward import planted in the graph is reported."""
    source, target = edge
    monkeypatch.setitem(EDGES, source, EDGES[source] | {target})
    assert any(problem.startswith(f"{source} -> {target}") for problem in _violations())


def _hook_points(path: Path) -> list[str]:
    """Top-level functions that let another app plug into this one (`register_*`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("register_")]


def test_every_hook_point_lives_in_its_apps_hooks_module():
    """An upper app looking for where to plug in reads one file per lower app: `<app>/hooks.py`."""
    astray = sorted(
        f"{module}.{name}" for module, path in MODULES.items() if path.name != "hooks.py" for name in _hook_points(path)
    )
    assert astray == []


def test_the_hook_rule_would_catch_a_registry_outside_hooks(tmp_path):
    planted = tmp_path / "panels.py"
    planted.write_text("def register_side_panel(fn):\n    pass\n")
    assert _hook_points(planted) == ["register_side_panel"]


# Migrations that depend on, or name a model of, an app above their own. They ran long ago and
# cannot change in effect: accounts' role grants named `ledger.Route` until the route moved down
# beside them (accounts 0005, state only); ledger 0007 replaced six upper apps' foreign keys to the
# decisions by triggers, and depends on their migrations to find them.
HISTORICAL_UPWARD_MIGRATIONS = {
    ("accounts", "0001_initial"),
    ("ledger", "0007_monthly_partitions"),
}
_FIELDS_WITH_A_MODEL = {"ForeignKey", "OneToOneField", "ManyToManyField"}


def _app_of_label(label: str) -> str | None:
    """The rule's name of a Django app label (None for Django's own and third-party apps)."""
    try:
        name = apps.get_app_config(label).name
    except LookupError:
        return None
    return _app_of(name)


def _model_references(tree: ast.AST) -> set[str]:
    """App labels this code names a model of: `"app.Model"` given to a relation field (first
    argument or `to=`), and `apps.get_model("app.Model")` / `get_model("app", "Model")`."""
    labels = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        targets = []
        if name in _FIELDS_WITH_A_MODEL:
            targets = node.args[:1] + [k.value for k in node.keywords if k.arg == "to"]
        elif name == "get_model" and node.args:
            first = node.args[0]
            if len(node.args) >= 2 and isinstance(first, ast.Constant) and isinstance(first.value, str):
                labels.add(first.value)
                continue
            targets = [first]
        for target in targets:
            if isinstance(target, ast.Constant) and isinstance(target.value, str):
                if reference := re.fullmatch(r"(\w+)\.\w+", target.value):
                    labels.add(reference[1])
    return labels


def _migration_dependencies(tree: ast.AST) -> set[str]:
    """App labels whose migrations this migration depends on (`dependencies` entries)."""
    labels = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "dependencies" for t in node.targets):
            for item in ast.walk(node.value):
                if isinstance(item, ast.Tuple) and item.elts and isinstance(item.elts[0], ast.Constant):
                    labels.add(item.elts[0].value)
    return labels


def _migration_files() -> list[tuple[str, str, Path]]:
    """(app label, migration name, path) of every migration of the project."""
    found = []
    for config in apps.get_app_configs():
        if _app_of(config.name) is None:
            continue
        for path in sorted((Path(config.path) / "migrations").glob("[0-9]*.py")):
            found.append((config.label, path.stem, path))
    return found


def _model_and_migration_arrows() -> dict[tuple[str, str], list[str]]:
    """(from app, to app) -> where: every string model reference and migration dependency."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for module, path in MODULES.items():
        source = _app_of(module)
        if source in (None, "project", PURE):
            continue
        for label in _model_references(ast.parse(path.read_text())):
            target = _app_of_label(label)
            if target not in (None, source):
                arrows.setdefault((source, target), []).append(f"{module} names a model of {label}")
    for label, name, path in _migration_files():
        source = _app_of_label(label)
        tree = ast.parse(path.read_text())
        for other in _model_references(tree) | _migration_dependencies(tree):
            target = _app_of_label(other)
            if target not in (None, source):
                arrows.setdefault((source, target), []).append(f"{label}.{name} -> {other}")
    return arrows


def _upward_arrows(arrows: dict[tuple[str, str], list[str]]) -> list[str]:
    problems = []
    for (source, target), where in sorted(arrows.items()):
        if target == "console.review" or _layer_of(target) > _layer_of(source):
            problems += [w for w in where if tuple(w.split(" ")[0].split(".", 1)) not in HISTORICAL_UPWARD_MIGRATIONS]
    return problems


def test_models_and_migrations_never_point_up():
    """A model of a lower app naming an upper app's model, or a migration depending on an upper
    app's, is the same arrow back up as an import, and makes the schema a cycle."""
    assert _upward_arrows(_model_and_migration_arrows()) == []


def test_the_migrations_allowed_to_point_up_still_do():
    """The allowlist holds only what history needs: an entry that no longer points up goes."""
    arrows = _model_and_migration_arrows()
    upward = {
        tuple(w.split(" ")[0].split(".", 1))
        for (source, target), where in arrows.items()
        if target == "console.review" or _layer_of(target) > _layer_of(source)
        for w in where
    }
    assert HISTORICAL_UPWARD_MIGRATIONS <= upward


def _app_edges() -> set[tuple[str, str]]:
    edges = {(source, target) for source, target in _model_and_migration_arrows()}
    for module, targets in EDGES.items():
        for target in targets:
            pair = (_app_of(module), _app_of(target))
            if pair[0] != pair[1]:
                edges.add(pair)
    return edges


def _two_way_ties(edges: set[tuple[str, str]]) -> list[tuple[str, str]]:
    ties = []
    for layer in LAYERS:
        for a in sorted(layer):
            for b in sorted(layer):
                if a < b and (a, b) in edges and (b, a) in edges:
                    ties.append((a, b))
    return ties


def test_no_two_apps_of_a_layer_lean_on_each_other():
    """Apps of one layer may use each other one way; both ways (by import, model reference or
    migration dependency) is a cycle the layering cannot see, and one of them belongs lower."""
    assert _two_way_ties(_app_edges()) == []


def test_the_rule_would_catch_a_model_pointing_up_and_a_two_way_tie():
    tree = ast.parse(
        'route = models.ForeignKey("grading.GradingItem", on_delete=models.CASCADE)\n'
        'other = models.OneToOneField(to="ledger.Decision", on_delete=models.CASCADE)\n'
        'Grade = apps.get_model("grading", "Grade")\n'
    )
    assert _model_references(tree) == {"grading", "ledger"}
    arrows = {("console.ledger", "grading"): ["console.ledger.models names a model of grading"]}
    assert _upward_arrows(arrows) == ["console.ledger.models names a model of grading"]
    assert _upward_arrows({("console.accounts", "console.ledger"): ["accounts.0001_initial -> ledger"]}) == []
    assert _two_way_ties({("console.accounts", "console.notify"), ("console.notify", "console.accounts")}) == [
        ("console.accounts", "console.notify")
    ]
    dependencies = ast.parse("dependencies = [('ledger', '0001_initial'), ('grading', '0003_x')]")
    assert _migration_dependencies(dependencies) == {"ledger", "grading"}
