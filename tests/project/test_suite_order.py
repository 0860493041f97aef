"""On several processes the files that take minutes start first (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.conftest import LONGEST_FILES, longest_files_first

TESTS = Path(__file__).resolve().parents[1]


def _item(path: str, name: str):
    return SimpleNamespace(path=Path(path), name=name)


def test_the_longest_files_move_to_the_front_longest_first_and_the_rest_keep_their_order():
    items = [
        _item("tests/ledger/test_ingest_api.py", "a"),
        _item("tests/project/test_backup_restore.py", "backup 1"),
        _item("tests/ledger/test_ingest_api.py", "b"),
        _item("tests/project/test_api_contract.py", "contract 1"),
        _item("tests/grading/test_queue.py", "c"),
        _item("tests/project/test_backup_restore.py", "backup 2"),
        _item("tests/project/test_api_contract.py", "contract 2"),
    ]

    ordered = [item.name for item in longest_files_first(items)]

    assert ordered == ["contract 1", "contract 2", "backup 1", "backup 2", "a", "b", "c"]


def test_every_file_named_as_longest_is_a_test_file_of_the_suite():
    """A renamed file would quietly lose its place at the front."""
    names = {path.name for path in TESTS.rglob("test_*.py")}
    assert set(LONGEST_FILES) <= names
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)
