"""Breaking changes between two OpenAPI 3.0 documents, as a generated client would feel them.

A client built from the old schema keeps working against the new server when every request it may
build is still accepted and every answer it may get is still one it can read. So, per operation
(method and path; component names do not matter, every $ref is followed):

- requests: an operation or a parameter gone, a parameter or body property newly required, a type
  changed, an enum value dropped, a limit tightened (maxLength, maximum, maxItems down; minLength,
  minimum, minItems up; a pattern added or changed), nullable dropped, unknown keys newly refused;
- responses: a success status gone, a property gone or no longer required, a type changed, an enum
  value added, nullable added.

Anything else (a new operation, an optional parameter, a new response property) is additive: the
snapshot is refreshed with `make schema-snapshot`.
"""

from __future__ import annotations

from typing import Any

METHODS = ("get", "put", "post", "patch", "delete")
_UPPER_LIMITS = ("maxLength", "maximum", "maxItems", "maxProperties")
_LOWER_LIMITS = ("minLength", "minimum", "minItems", "minProperties")


class _Schemas:
    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def resolve(self, schema: Any) -> Any:
        seen = set()
        while isinstance(schema, dict) and "$ref" in schema and schema["$ref"] not in seen:
            seen.add(schema["$ref"])
            target: Any = self.document
            for part in schema["$ref"].lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            schema = target
        return schema


def breaking_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Every breaking change from `old` to `new`, one line each."""
    problems: list[str] = []
    diff = _Diff(_Schemas(old), _Schemas(new), problems)
    for path, old_item in old.get("paths", {}).items():
        new_item = new.get("paths", {}).get(path, {})
        for method in METHODS:
            if method not in old_item:
                continue
            where = f"{method.upper()} {path}"
            if method not in new_item:
                problems.append(f"{where}: the operation was removed")
                continue
            diff.operation(where, old_item[method], new_item[method])
    return problems


class _Diff:
    def __init__(self, old: _Schemas, new: _Schemas, problems: list[str]) -> None:
        self.old, self.new, self.problems = old, new, problems

    def report(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def operation(self, where: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.parameters(where, old.get("parameters", []), new.get("parameters", []))
        old_body = old.get("requestBody")
        new_body = new.get("requestBody")
        if new_body and new_body.get("required") and not (old_body and old_body.get("required")):
            self.report(where, "a request body is now required")
        if old_body and new_body:
            for media, content in old_body.get("content", {}).items():
                if media not in new_body.get("content", {}):
                    self.report(where, f"the request body no longer takes {media}")
                    continue
                self.schema(f"{where} request", content.get("schema"), new_body["content"][media].get("schema"), True)
        elif old_body and not new_body:
            self.report(where, "the request body is no longer taken")
        old_responses, new_responses = old.get("responses", {}), new.get("responses", {})
        for status, response in old_responses.items():
            if status not in new_responses:
                if status.startswith("2"):
                    self.report(where, f"the {status} response was removed")
                continue
            for media, content in response.get("content", {}).items():
                new_content = new_responses[status].get("content", {})
                if media not in new_content:
                    self.report(where, f"the {status} response no longer comes as {media}")
                    continue
                self.schema(f"{where} {status}", content.get("schema"), new_content[media].get("schema"), False)

    def parameters(self, where: str, old: list[dict], new: list[dict]) -> None:
        def key(parameter: dict) -> tuple[str, str]:
            return parameter["in"], parameter["name"]

        old_by_key = {key(p): p for p in old}
        new_by_key = {key(p): p for p in new}
        for k, parameter in new_by_key.items():
            if parameter.get("required") and not old_by_key.get(k, {}).get("required"):
                self.report(where, f"the {k[0]} parameter {k[1]!r} is now required")
        for k, parameter in old_by_key.items():
            if k not in new_by_key:
                self.report(where, f"the {k[0]} parameter {k[1]!r} was removed")
            else:
                self.schema(
                    f"{where} {k[0]} parameter {k[1]!r}", parameter.get("schema"), new_by_key[k].get("schema"), True
                )

    def schema(self, where: str, old: Any, new: Any, request: bool, depth: int = 0) -> None:
        old, new = self.old.resolve(old), self.new.resolve(new)
        if not isinstance(old, dict) or not isinstance(new, dict) or depth > 40:
            return
        old_type, new_type = old.get("type"), new.get("type")
        if old_type and new_type and old_type != new_type:
            if not (old_type == "integer" and new_type == "number" and request):
                self.report(where, f"the type changed from {old_type} to {new_type}")
                return
        if old_type and not new_type and not request and not _any_of(new):
            self.report(where, f"the type {old_type} is no longer stated")
        if request:
            self._request_constraints(where, old, new)
        else:
            if new.get("nullable") and not old.get("nullable"):
                self.report(where, "may now be null")
            new_enum = new.get("enum")
            if old.get("enum") is not None and new_enum is not None:
                added = [v for v in new_enum if v not in old["enum"] and v is not None]
                if added:
                    self.report(where, f"may now be {added}")
        self._properties(where, old, new, request, depth)
        if "items" in old and "items" in new:
            self.schema(f"{where}[]", old["items"], new["items"], request, depth + 1)
        old_extra, new_extra = old.get("additionalProperties"), new.get("additionalProperties")
        if isinstance(old_extra, dict) and isinstance(new_extra, dict):
            self.schema(f"{where}{{}}", old_extra, new_extra, request, depth + 1)
        for combinator in ("oneOf", "anyOf"):
            old_variants, new_variants = old.get(combinator), new.get(combinator)
            if old_variants and new_variants:
                if request and len(new_variants) < len(old_variants):
                    self.report(where, f"{combinator} lost a variant")
                if not request and len(new_variants) > len(old_variants):
                    self.report(where, f"{combinator} gained a variant")
                for i, (a, b) in enumerate(zip(old_variants, new_variants, strict=False)):
                    self.schema(f"{where}|{i}", a, b, request, depth + 1)

    def _request_constraints(self, where: str, old: dict, new: dict) -> None:
        if old.get("nullable") and not new.get("nullable"):
            self.report(where, "no longer takes null")
        if old.get("enum") is not None:
            dropped = [v for v in old["enum"] if v not in (new.get("enum") or old["enum"])]
            if dropped:
                self.report(where, f"no longer takes {dropped}")
        elif new.get("enum") is not None:
            self.report(where, "now takes only an enumerated set of values")
        for limit in _UPPER_LIMITS:
            if limit in new and (limit not in old or new[limit] < old[limit]):
                self.report(where, f"{limit} tightened from {old.get(limit)} to {new[limit]}")
        for limit in _LOWER_LIMITS:
            if limit in new and (limit not in old or new[limit] > old[limit]):
                self.report(where, f"{limit} tightened from {old.get(limit)} to {new[limit]}")
        if "pattern" in new and new.get("pattern") != old.get("pattern"):
            self.report(where, f"the pattern changed to {new['pattern']!r}")
        if new.get("additionalProperties") is False and old.get("additionalProperties") is not False:
            self.report(where, "unknown keys are now refused")

    def _properties(self, where: str, old: dict, new: dict, request: bool, depth: int) -> None:
        old_props, new_props = old.get("properties") or {}, new.get("properties") or {}
        old_required, new_required = set(old.get("required", [])), set(new.get("required", []))
        for name, schema in old_props.items():
            at = f"{where}.{name}"
            if name not in new_props:
                if not request:
                    self.report(at, "was removed")
                elif new.get("additionalProperties") is False:
                    self.report(at, "is no longer taken")
                continue
            if not request and name in old_required and name not in new_required:
                self.report(at, "is no longer always present")
            self.schema(at, schema, new_props[name], request, depth + 1)
        if request:
            for name in sorted(new_required - old_required):
                self.report(f"{where}.{name}", "is now required")


def _any_of(schema: dict) -> bool:
    return any(key in schema for key in ("oneOf", "anyOf", "allOf", "$ref"))
