"""One error envelope for the whole API: {"error": {"code", "message", "details"}}."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from console.core.errors import ServiceError, detail

logger = logging.getLogger("console.api")


# One problem of a request, as every error's `details` lists it.
_ERROR_DETAIL_FIELDS = {
    "field": serializers.CharField(
        allow_null=True,
        help_text="The field at fault as a dotted path (`evidence.quote`; inside a batch item the path "
        "within the item, such as `gate.score`, beside its `index`) or a query parameter's name; null "
        "when the problem is the whole request.",
    ),
    "index": serializers.IntegerField(
        required=False,
        help_text="The position of the failing item in a batch body (`decisions`, `labels`); "
        "present only for batch items.",
    ),
    "code": serializers.CharField(help_text="A stable, machine-readable code for this problem."),
    "message": serializers.CharField(help_text="What is wrong, for a person."),
}


# The error envelope as the OpenAPI schema shows it; every API view lists it for its error statuses.
ERROR_SCHEMA = inline_serializer(
    "ErrorEnvelope",
    {
        "error": inline_serializer(
            "ErrorBody",
            {
                "code": serializers.CharField(help_text="A stable, machine-readable code for the error."),
                "message": serializers.CharField(help_text="What went wrong, for a person."),
                "details": inline_serializer(
                    "ErrorDetail",
                    _ERROR_DETAIL_FIELDS,
                    many=True,
                    help_text="Every problem found, one object per problem (empty when there is nothing to "
                    "add to the message). An entry may carry more keys that give context (`value`, "
                    "`request_id`, the id of a conflicting object); `field`, `code` and `message` are always "
                    "present and `index` is present exactly for the items of a batch.",
                ),
            },
        )
    },
)

_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    429: "throttled",
    500: "server_error",
}

SERVER_ERROR_MESSAGE = "The server failed to handle this request; the error is logged."


def envelope(code: str, message: str, details=None) -> dict:
    return {"error": {"code": code, "message": message, "details": error_details(details, code=code, message=message)}}


def error_response(status_code: int, code: str, message: str, details=None, headers=None) -> Response:
    return Response(envelope(code, message, details), status=status_code, headers=headers)


def error_details(details: Any, *, code: str, message: str) -> list[dict]:
    """`details` in the one documented shape, a list of {"field", "index"?, "code", "message"}.

    Services build their entries with `detail()`; this also brings what a framework raises into the
    shape (DRF's serializer errors, `{field: [messages]}` nested by field and list position) and gives
    an entry without a code the error's own, so no answer leaves the server in another shape.
    """
    if details is None:
        return []
    if isinstance(details, dict | list) and _is_field_tree(details):
        return [detail(field, getattr(text, "code", None) or code, str(text)) for field, text in _leaves(details)]
    if isinstance(details, dict):
        return [detail(None, code, message) | details]
    if isinstance(details, list):
        return [_entry(item, code=code, message=message) for item in details]
    return [detail(None, code, str(details))]


def _entry(item: Any, *, code: str, message: str) -> dict:
    if not isinstance(item, dict):
        return detail(None, getattr(item, "code", None) or code, str(item))
    rest = {k: v for k, v in item.items() if k not in ("field", "index", "code", "message")}
    field = item.get("field", item.get("parameter"))
    return detail(field, item.get("code") or code, str(item.get("message", message)), index=item.get("index"), **rest)


def _is_field_tree(details: dict | list) -> bool:
    """True for DRF's serializer errors: only ErrorDetail strings at the leaves."""
    leaves = list(_leaves(details))
    return bool(leaves) and all(isinstance(text, exceptions.ErrorDetail) for _, text in leaves)


def _leaves(tree: Any, path: str = ""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            key = "" if key == "non_field_errors" else str(key)
            yield from _leaves(value, f"{path}.{key}" if path and key else path or key)
    elif isinstance(tree, list) and any(isinstance(value, dict | list) for value in tree):
        for position, value in enumerate(tree):
            yield from _leaves(value, f"{path}.{position}" if path else str(position))
    elif isinstance(tree, list):
        for value in tree:
            yield path or None, value
    else:
        yield path or None, tree


def exception_handler(exc, context):
    if isinstance(exc, ServiceError):
        return error_response(exc.status, exc.code, exc.message, exc.details)
    if isinstance(exc, RequestDataTooBig):
        return error_response(413, "too_large", "The request body is larger than the server accepts.")
    if isinstance(exc, Http404):
        return error_response(404, "not_found", "Not found.")
    if isinstance(exc, PermissionDenied):
        return error_response(403, "forbidden", "You do not have permission to do this.")
    if isinstance(exc, exceptions.APIException):
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        detail = exc.detail
        if isinstance(detail, dict | list):
            message, details = _first_message(detail), detail
        else:
            message, details = str(detail), None
        code = _CODES.get(exc.status_code, getattr(detail, "code", None) or "error")
        if isinstance(exc, exceptions.ParseError):
            code = "malformed_json"
        return error_response(exc.status_code, code, message, details, headers=headers)
    # Anything else is a bug: log it with its traceback, and answer in the envelope rather than
    # Django's HTML page so a client can still read the error (DRF rolls the transaction back).
    request = context.get("request")
    logger.error(
        "Unhandled error in %s %s", getattr(request, "method", "?"), getattr(request, "path", "?"), exc_info=exc
    )
    return error_response(500, "server_error", SERVER_ERROR_MESSAGE)


def _first_message(detail) -> str:
    while isinstance(detail, dict | list) and detail:
        detail = next(iter(detail.values())) if isinstance(detail, dict) else detail[0]
    return str(detail) if detail else "Invalid input."


def json_error_view(status_code: int, message: str):
    # Exempt from CSRF: an unmatched path changes nothing, and a POST to one must answer this 404
    # rather than the CSRF middleware's HTML 403 (which runs before any view).
    @csrf_exempt
    def view(request, exception=None):
        return JsonResponse(envelope(_CODES.get(status_code, "error"), message), status=status_code)

    return view


api_not_found = json_error_view(status.HTTP_404_NOT_FOUND, "Not found.")


def api_error(status_code: int, message: str, code: str | None = None) -> JsonResponse:
    """The envelope outside DRF (middleware, Django's error handlers, the CSRF failure view)."""
    return JsonResponse(envelope(code or _CODES.get(status_code, "error"), message), status=status_code)
