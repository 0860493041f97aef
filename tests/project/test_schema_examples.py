"""Every example in the OpenAPI schema is an instance of the schema it illustrates, so the docs never
show a body the server would refuse or could not send."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

SNAPSHOT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
DOCUMENT = json.loads(SNAPSHOT.read_text())


def _json_schema(schema, seen=()):
    """OpenAPI 3.0's dialect as JSON Schema: $refs inlined, `nullable` as a null alternative."""
    if isinstance(schema, list):
        return [_json_schema(item, seen) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return {}
        return _json_schema(DOCUMENT["components"]["schemas"][name], (*seen, name))
    converted = {key: _json_schema(value, seen) for key, value in schema.items() if key != "nullable"}
    for key in ("properties",):
        if key in schema:
            converted[key] = {name: _json_schema(value, seen) for name, value in schema[key].items()}
    if schema.get("exclusiveMinimum") is True:
        converted["exclusiveMinimum"] = converted.pop("minimum")
    if schema.get("exclusiveMaximum") is True:
        converted["exclusiveMaximum"] = converted.pop("maximum")
    if schema.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def _examples():
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            bodies = [("request", operation.get("requestBody", {}).get("content", {}))]
            bodies += [(status, response.get("content", {})) for status, response in operation["responses"].items()]
            for where, content in bodies:
                for media in content.values():
                    for name, example in media.get("examples", {}).items():
                        yield pytest.param(media["schema"], example["value"], id=f"{method} {path} {where} {name}")


@pytest.mark.parametrize(("schema", "value"), list(_examples()))
def test_the_example_fits_its_schema(schema, value):
    jsonschema.validate(value, _json_schema(schema), cls=jsonschema.Draft7Validator)


def _operations():
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            yield pytest.param(operation, id=f"{method} {path}")


@pytest.mark.parametrize("operation", list(_operations()))
def test_every_success_with_a_body_shows_an_example_of_it(operation):
    # A generated client's docs and a person reading /api/docs/ see the shape filled in; a success
    # without a body (204) has nothing to show and says so in its description.
    for status, response in operation["responses"].items():
        if not status.startswith("2"):
            continue
        if not response.get("content"):
            assert "no body" in response["description"].lower(), f"{status} neither has a body nor says it has none"
        for media_type, media in response.get("content", {}).items():
            assert media.get("examples") or "example" in media, f"{status} {media_type} has no example"
