"""Errors a service raises for the caller to see; the API turns them into the error envelope."""

from typing import Any


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
