import json

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from console.accounts.models import Route
from console.ledger.models import Decision
from tests.factories import record


def _write_jsonl(path, lines):
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_import_decisions_writes_good_lines_and_reports_bad_ones(route, tmp_path, capsys):
    good = [record() for _ in range(3)]
    bad = record(gate={"name": "nli", "score": None, "cutoff": 0.5})
    source = _write_jsonl(
        tmp_path / "decisions.jsonl", [good[0], "{not json", good[1], bad, record(route="nowhere"), good[2]]
    )
    report = tmp_path / "rejected.jsonl"
    call_command("import_decisions", str(source), "--report", str(report), "--no-progress", "--batch-size", "2")
    out, err = capsys.readouterr()
    assert "created 3, unchanged 0, rejected 3" in out
    assert "line 2: record not JSON" in err
    assert "line 4: gate.score is required" in err
    assert "unknown route 'nowhere'" in err
    rejected = [json.loads(line) for line in report.read_text().splitlines()]
    assert [r["line"] for r in rejected] == [2, 4, 5]
    assert Decision.objects.count() == 3


def test_import_decisions_is_safe_to_run_again(route, tmp_path, capsys):
    source = _write_jsonl(tmp_path / "d.jsonl", [record() for _ in range(4)])
    call_command("import_decisions", str(source), "--no-progress")
    call_command("import_decisions", str(source), "--no-progress")
    assert "created 0, unchanged 4, rejected 0" in capsys.readouterr().out
    assert Decision.objects.count() == 4


def test_import_decisions_keeps_the_rest_of_a_batch_when_one_line_conflicts(route, tmp_path, capsys):
    stored = record()
    call_command("import_decisions", str(_write_jsonl(tmp_path / "a.jsonl", [stored])), "--no-progress")
    fresh = record()
    source = _write_jsonl(tmp_path / "b.jsonl", [fresh, dict(stored, claim="changed")])
    call_command("import_decisions", str(source), "--no-progress")
    out, err = capsys.readouterr()
    assert "created 1, unchanged 0, rejected 1" in out
    assert "line 2: request_id" in err
    assert Decision.objects.filter(request_id=fresh["request_id"]).exists()


def test_import_decisions_names_a_missing_file(db):
    with pytest.raises(CommandError, match="No such file"):
        call_command("import_decisions", "/nonexistent.jsonl")


def test_create_route_creates_and_audits(db, capsys):
    call_command("create_route", "billing", "--name", "Billing questions")
    assert Route.objects.get(slug="billing").name == "Billing questions"
    assert AuditEvent.objects.filter(action="route_created", object_id=str(Route.objects.get().pk)).exists()


def test_create_route_refuses_a_duplicate_or_bad_slug(db):
    call_command("create_route", "billing", "--name", "B")
    with pytest.raises(CommandError, match="slug"):
        call_command("create_route", "billing", "--name", "Again")
    with pytest.raises(CommandError, match="slug"):
        call_command("create_route", "not a slug", "--name", "Bad")


def test_import_decisions_rejects_a_line_nested_too_deeply_and_keeps_going(route, tmp_path, capsys):
    good = record()
    source = _write_jsonl(tmp_path / "deep.jsonl", ["[" * 100_000 + "]" * 100_000, good])
    report = tmp_path / "rejected.jsonl"
    call_command("import_decisions", str(source), "--report", str(report), "--no-progress")
    assert "created 1, unchanged 0, rejected 1" in capsys.readouterr().out
    assert [json.loads(line)["line"] for line in report.read_text().splitlines()] == [1]
    assert Decision.objects.get().request_id == good["request_id"]
