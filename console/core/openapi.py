"""What every operation of the OpenAPI schema shares, declared once (the schema is the contract).

- `ClosedObject`: the base of a request body's serializer when the server refuses keys it does not
  know; its schema says `additionalProperties: false`, so a generated client and a fuzzer know it.
- `postprocess`: a drf-spectacular postprocessing hook. Every operation that needs a token
  answers 401 without one and 429 (with `Retry-After`) once a client has sent too many bad tokens
  (console.accounts.throttle); every write (POST, PUT, PATCH) reads a body, even an action that takes
  none (console/core/parsers.py, `body_checked`), so it answers 415 to another media type, 400 to
  JSON that does not parse or to a field it does not take, and 413 past MAX_REQUEST_BYTES; every
  operation answers 414 to a URL past MAX_URL_LENGTH (console/core/middleware.py). Declaring these
  per view would be forty copies of the same lines, and one forgotten copy is an undocumented status.
- Every request body says `additionalProperties: false`: every write refuses a top-level field it
  does not take (400 `unknown_field`; the parser's `body_fields`, the batch bodies' own check), and
  the walk of tests/project/test_state_changes_are_audited.py sends each one such a field. The
  hook closes what a view's serializer left open, so no body can be forgotten.
- The shared headers: `ETag`, `If-None-Match`, `Retry-After`.
- `links`: OpenAPI links for the natural next step after an operation (ingest -> look the decision
  up, draft -> sign). drf-spectacular has no parameter for them, so a view declares them as an
  extension of its operation and `postprocess` moves them into the responses. A link names its target by
  path (`operationRef`), which stays put when another view's operationId changes.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

ERROR_REF = {"$ref": "#/components/schemas/ErrorEnvelope"}

RETRY_AFTER = {
    "description": "Seconds to wait before trying again.",
    "schema": {"type": "integer", "minimum": 0},
}
ETAG = {
    "description": "A strong validator of this representation; send it back as If-None-Match.",
    "schema": {"type": "string"},
}
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    required=False,
    description="An ETag from an earlier answer: 304 with no body while the representation is unchanged.",
)

# Statuses any authenticated operation may answer, whatever its view declares.
_AUTH_STATUSES = {
    "401": "No valid token (`Authorization: Token <key>` or `Bearer <key>`) or session.",
    "429": "Too many failed sign-ins or bad tokens from this client or for this user; see Retry-After.",
}
_BODY_STATUSES = {
    "400": "The body is not valid JSON or not valid for this operation.",
    "413": "The body (decoded, when sent compressed) is larger than MAX_REQUEST_BYTES: `too_large`.",
    "415": "The body is not `application/json`.",
}
_NO_BODY_STATUSES = {
    **_BODY_STATUSES,
    "400": "This action takes no body: each field sent is an `unknown_field` detail; a body that is not "
    "JSON is `malformed_json`.",
}
_URL_TOO_LONG = "The path and query are longer than MAX_URL_LENGTH characters: `uri_too_long`."
_WRITES = {"post", "put", "patch"}
_PAGING = {"limit", "cursor"}


# A request body whose unknown keys the server refuses with 400. Documentation only: the views
# make that check themselves, as they always have. (A comment, not a docstring: a subclass without
# a docstring of its own would show this one as its description.)
class ClosedObject(serializers.Serializer):
    pass


class _ClosedObjectExtension(OpenApiSerializerExtension):
    target_class = ClosedObject
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        schema["additionalProperties"] = False
        return schema


_LINKS_KEY = "x-console-links"
_EMPTY_IS_ABSENT = "x-console-empty-is-absent"


def empty_is_absent(parameter: OpenApiParameter) -> OpenApiParameter:
    """Mark an optional query parameter that the view reads sent empty (`?kind=`) as absent, as a
    form sends an unset field; the schema then says `allowEmptyValue`, which drf-spectacular has no
    parameter for (the hook turns the mark into it)."""
    parameter.extensions = {**(parameter.extensions or {}), _EMPTY_IS_ABSENT: True}
    return parameter


def link(
    path: str,
    *,
    method: str = "get",
    parameters: dict[str, str] | None = None,
    body: Any = None,
    description: str = "",
) -> dict[str, Any]:
    """A link to the operation at `path` and `method`; values are runtime expressions
    (`$response.body#/id`, `$request.body#/decisions/0/route`)."""
    target: dict[str, Any] = {"operationRef": "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/" + method}
    if parameters:
        target["parameters"] = parameters
    if body is not None:
        target["requestBody"] = body
    if description:
        target["description"] = description
    return target


def links(by_status: dict[int, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """For `extend_schema(extensions=...)`: the links of each response status, by name."""
    return {_LINKS_KEY: {str(status): named for status, named in by_status.items()}}


def _error_response(description: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": ERROR_REF}}, "description": description}


def _close_request_body(operation: dict[str, Any], components: dict[str, Any]) -> None:
    for media in operation.get("requestBody", {}).get("content", {}).values():
        schema = media.get("schema", {})
        if "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[-1]]
        for variant in schema.get("oneOf", [schema]):
            if variant.get("type") == "object" or "properties" in variant:
                variant.setdefault("additionalProperties", False)


def postprocess(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    components = result.get("components", {}).get("schemas", {})
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            _close_request_body(operation, components)
            responses = operation.setdefault("responses", {})
            for status, named in operation.pop(_LINKS_KEY, {}).items():
                responses[status].setdefault("links", {}).update(named)
            if operation.get("security") != [{}]:
                for status, description in _AUTH_STATUSES.items():
                    responses.setdefault(status, _error_response(description))
            if method in _WRITES:
                body_statuses = _BODY_STATUSES if "requestBody" in operation else _NO_BODY_STATUSES
                for status, description in body_statuses.items():
                    responses.setdefault(status, _error_response(description))
            responses.setdefault("414", _error_response(_URL_TOO_LONG))
            for parameter in operation.get("parameters", []):
                if parameter.pop(_EMPTY_IS_ABSENT, False):
                    parameter["allowEmptyValue"] = True
            paging = [p for p in operation.get("parameters", []) if p.get("in") == "query" and p.get("name") in _PAGING]
            if paging:
                # Every paged list reads an empty `limit` or `cursor` as absent (console/core/paging.py),
                # as a form sends an unset field; a limit out of range or a cursor it did not issue is a 400.
                for parameter in paging:
                    parameter["allowEmptyValue"] = True
                responses.setdefault(
                    "400", _error_response("A `limit` out of range or a `cursor` not issued by this list.")
                )
            for status in ("429", "503"):
                if status in responses:
                    responses[status].setdefault("headers", {}).setdefault("Retry-After", RETRY_AFTER)
            operation["responses"] = dict(sorted(responses.items()))
    return result
