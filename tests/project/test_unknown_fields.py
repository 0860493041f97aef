"""An unknown top-level field in a write body is a 400 naming it (`unknown_field`), never ignored:
a misspelt optional field would otherwise read as absent. The walk in
test_state_changes_are_audited.py sends every API write its valid body plus an unknown field."""

from __future__ import annotations

import json
from pathlib import Path

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


def _request_bodies():
    document = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
    schemas = document["components"]["schemas"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                schema = media["schema"]
                if "$ref" in schema:
                    schema = schemas[schema["$ref"].rsplit("/", 1)[-1]]
                yield pytest.param(schema, id=f"{method} {path}")


@pytest.mark.parametrize("schema", list(_request_bodies()))
def test_every_request_body_in_the_schema_says_unknown_fields_are_refused(schema):
    # What the server does (above, and for every write in the walk): a generated client and a fuzzer
    # read it from `additionalProperties: false`, on the body or on each of its alternatives.
    for variant in schema.get("oneOf", [schema]):
        assert variant.get("additionalProperties") is False, variant
