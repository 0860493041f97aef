"""One error envelope for the whole API: {"error": {"code", "message", "details"}}."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, JsonResponse
from drf_spectacular.utils import inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from console.core.errors import ServiceError

logger = logging.getLogger("console.api")

# The error envelope as the OpenAPI schema shows it; every API view lists it for its error statuses.
ERROR_SCHEMA = inline_serializer(
    "Error",
    {
        "error": inline_serializer(
            "ErrorBody",
            {
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "details": serializers.JSONField(),
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
    415: "unsupported_media_type",
    429: "throttled",
    500: "server_error",
}

SERVER_ERROR_MESSAGE = "The server failed to handle this request; the error is logged."


def envelope(code: str, message: str, details=None) -> dict:
    return {"error": {"code": code, "message": message, "details": details}}


def error_response(status_code: int, code: str, message: str, details=None, headers=None) -> Response:
    return Response(envelope(code, message, details), status=status_code, headers=headers)


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
    def view(request, exception=None):
        return JsonResponse(envelope(_CODES.get(status_code, "error"), message), status=status_code)

    return view


api_not_found = json_error_view(status.HTTP_404_NOT_FOUND, "Not found.")
