"""A schema change that breaks a generated client fails the suite.

docs/openapi.json is the published contract. The schema the code generates now is compared with it:
a breaking change (tests/project/schema_diff.py says which are) fails; an additive one only asks
for the snapshot to be refreshed with `make schema-snapshot`, so the published file stays the schema
the code serves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.project.schema_diff import breaking_changes

SNAPSHOT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
REFRESH = "make schema-snapshot"


@pytest.fixture(scope="module")
def live_schema() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True)))


def test_the_schema_keeps_every_promise_of_the_published_snapshot(live_schema):
    problems = breaking_changes(json.loads(SNAPSHOT.read_text()), live_schema)
    assert not problems, (
        "The schema breaks clients generated from docs/openapi.json:\n  "
        + "\n  ".join(problems)
        + "\nKeep the old shape (add, do not change), or make the break a new API version. A break the"
        " contract itself calls for is recorded deliberately: `make schema-snapshot`, with the break named in"
        " the commit message and the README."
    )


def test_the_published_snapshot_is_the_schema_the_code_serves(live_schema):
    assert json.loads(SNAPSHOT.read_text()) == live_schema, (
        f"The schema grew; run `{REFRESH}` and commit docs/openapi.json."
    )


def _document(request_body=None, response=None, parameters=()):
    operation = {
        "parameters": list(parameters),
        "responses": {"200": {"content": {"application/json": {"schema": response or {"type": "object"}}}}},
    }
    if request_body is not None:
        operation["requestBody"] = {"content": {"application/json": {"schema": request_body}}}
    return {"openapi": "3.0.3", "paths": {"/things": {"post": operation}}, "components": {"schemas": {}}}


def _thing(**properties):
    return {"type": "object", "properties": properties, "required": sorted(properties)}


def test_an_added_optional_field_or_operation_is_not_a_break():
    old = _document(
        request_body={"type": "object", "properties": {"a": {"type": "string"}}}, response=_thing(a={"type": "string"})
    )
    new = _document(
        request_body={"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
        response=_thing(a={"type": "string"}, b={"type": "integer"}),
    )
    new["paths"]["/other"] = {"get": {"responses": {}}}
    assert breaking_changes(old, new) == []


def test_a_removed_operation_is_a_break():
    new = _document()
    new["paths"] = {}
    assert breaking_changes(_document(), new) == ["POST /things: the operation was removed"]


def test_a_response_field_removed_or_retyped_is_a_break():
    old = _document(response=_thing(a={"type": "string"}, b={"type": "integer"}))
    new = _document(response=_thing(b={"type": "string"}))
    assert breaking_changes(old, new) == [
        "POST /things 200.a: was removed",
        "POST /things 200.b: the type changed from integer to string",
    ]


def test_a_newly_required_request_field_or_a_tighter_limit_is_a_break():
    old = _document(request_body={"type": "object", "properties": {"a": {"type": "string", "maxLength": 10}}})
    new = _document(
        request_body={"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}}, "required": ["a"]}
    )
    assert breaking_changes(old, new) == [
        "POST /things request.a: maxLength tightened from 10 to 5",
        "POST /things request.a: is now required",
    ]


def test_component_names_do_not_matter_only_shapes_do():
    old = _document(response={"$ref": "#/components/schemas/A"})
    old["components"]["schemas"]["A"] = _thing(x={"type": "number"})
    new = _document(response={"$ref": "#/components/schemas/B"})
    new["components"]["schemas"]["B"] = _thing(x={"type": "number"})
    assert breaking_changes(old, new) == []


def test_a_new_enum_value_in_an_answer_or_a_dropped_one_in_a_request_is_a_break():
    old = _document(
        request_body={"type": "object", "properties": {"s": {"type": "string", "enum": ["a", "b"]}}},
        response=_thing(s={"type": "string", "enum": ["a"]}),
    )
    new = _document(
        request_body={"type": "object", "properties": {"s": {"type": "string", "enum": ["a"]}}},
        response=_thing(s={"type": "string", "enum": ["a", "c"]}),
    )
    assert breaking_changes(old, new) == [
        "POST /things request.s: no longer takes ['b']",
        "POST /things 200.s: may now be ['c']",
    ]
