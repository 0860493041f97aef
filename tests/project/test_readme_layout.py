"""The README's Layout section names every app once and nothing that does not exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layout_block() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Layout") :]
    return section[section.index("```") + 3 : section.index("```", section.index("```") + 3)]


def test_the_readme_layout_lists_each_app_once_and_only_apps_that_exist():
    block = _layout_block()
    apps = re.findall(r"^  (\w+)/", block, flags=re.M)
    top = re.findall(r"^(audit|grading)/", block, flags=re.M)
    assert len(apps) == len(set(apps)) and top == ["audit", "grading"]
    on_disk = {p.parent.name for p in (ROOT / "console").glob("*/__init__.py")}
    assert set(apps) == on_disk
