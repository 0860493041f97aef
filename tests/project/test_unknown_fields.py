"""An unknown top-level field in a write body is a 400 naming it (`unknown_field`), never ignored:
a misspelt optional field would otherwise read as absent. The walk in
test_state_changes_are_audited.py sends every API write its valid body plus an unknown field."""

from __future__ import annotations

import pytest

from tests.factories import record

pytestmark = pytest.mark.django_db


def _unknown(response) -> list[str]:
    assert response.status_code == 400, response.content
    return [d["field"] for d in response.json()["error"]["details"] if d["code"] == "unknown_field"]


def test_ingest_names_an_unknown_field_beside_the_decisions(integrator):
    body = {"decisions": [record()], "decisons_extra": True}
    assert _unknown(integrator.post("/api/v1/decisions", body, format="json")) == ["decisons_extra"]


def test_a_grade_with_a_misspelt_note_is_refused(route, grader):
    from tests.grading.helpers import next_item, pooled

    pooled([record()])
    item = next_item(grader)
    body = {"verdict": "correct", "nots": "typo"}
    assert _unknown(grader.post(f"/api/v1/grading/items/{item['id']}/grades", body, format="json")) == ["nots"]
    assert (
        grader.post(f"/api/v1/grading/items/{item['id']}/grades", {"verdict": "correct"}, format="json").status_code
        == 201
    )
