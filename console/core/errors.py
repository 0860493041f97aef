"""Errors a service raises for the caller to see; the API turns them into the error envelope.

`details` is a list of `detail()` entries, {"field", "index"?, "code", "message"}: the one shape
every error's details has (console.core.api documents it in the OpenAPI schema)."""

from typing import Any


def detail(field: str | None, code: str, message: str, *, index: int | None = None, **context: Any) -> dict:
    """One entry of `error.details`: {"field", "index"?, "code", "message"} plus any context keys."""
    entry: dict[str, Any] = {"field": field or None}
    if index is not None:
        entry["index"] = index
    return entry | {"code": code, "message": message} | context


class ServiceError(Exception):
    status = 400
    code = "invalid"

    def __init__(
        self, message: str, *, details: Any = None, code: str | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        if code:
            self.code = code
        if status:
            self.status = status


class InvalidInput(ServiceError):
    status = 400
    code = "invalid"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"


class TooLarge(ServiceError):
    status = 413
    code = "too_large"
