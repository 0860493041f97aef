"""The dependency rule of docs/architecture.md, enforced by reading every import of the code.

Apps form layers; a module may import its own app, any app of a lower layer, and apps of its own
layer (accounts and audit use each other: permissions read roles, services write events), but
never an app of a higher layer. `review` sits on top and nothing imports it. No module may take
part in an import cycle, and imports hidden inside functions count like the others.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lowest first. An app may import apps of its own layer and of every layer below.
LAYERS: list[set[str]] = [
    {"console.core"},
    {"console.accounts", "audit", "console.notify"},
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
    "console.embedded",
    "console.env",
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
