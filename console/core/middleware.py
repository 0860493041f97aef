import functools
import io
import logging
import zlib
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import HttpResponseServerError
from django.shortcuts import render
from django.urls import Resolver404
from django.views.csrf import csrf_failure as django_csrf_failure

from console.core.api import SERVER_ERROR_MESSAGE, api_error
from console.core.errors import ServiceError

logger = logging.getLogger(__name__)

# Paths anyone may reach: the health check, login, static assets. /api/ authenticates per request
# (401 with the error envelope, never a redirect to a login page).
_OPEN_PREFIXES = ("/favicon.ico", "/healthz", "/accounts/login/", "/accounts/oidc/", "/static/", "/api/", "/appeal/")


class LoginRequiredEverywhereMiddleware:
    """Every page needs a signed-in user unless its path is listed above."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.static_prefix = "/" + settings.STATIC_URL.lstrip("/")

    def __call__(self, request):
        path = request.path_info
        if not request.user.is_authenticated and not (
            path.startswith(_OPEN_PREFIXES) or path.startswith(self.static_prefix)
        ):
            return redirect_to_login(request.get_full_path())
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """Every HTML answer carries settings.CONTENT_SECURITY_POLICY, so a tag that slipped through a
    sanitiser can still neither run a script nor load an image from another site."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.policy = settings.CONTENT_SECURITY_POLICY

    def __call__(self, request):
        response = self.get_response(request)
        if self.policy and response.get("Content-Type", "").startswith("text/html"):
            response.headers.setdefault("Content-Security-Policy", self.policy)
        return response


class ServiceErrorPagesMiddleware:
    """A ServiceError that escapes a page view becomes a page in the site's layout with its status
    and message (403 for Forbidden, 404 for NotFound, ...), so views never translate errors by hand;
    so does Django's PermissionDenied (403).
    The API answers the same errors in its JSON envelope (console.core.api.exception_handler)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if request.path_info.startswith("/api/"):
            return None
        if isinstance(exception, PermissionDenied):
            # Answered here rather than by Django's handler, which logs a refusal with its traceback;
            # this way a 403 is one warning line ("Forbidden: /path"), like every other 4xx.
            return permission_denied(request, exception)
        if not isinstance(exception, ServiceError):
            return None
        return error_page(request, exception.status, exception.message)


class RejectLongUrlMiddleware:
    """A path and query longer than MAX_URL_LENGTH characters is a 414 in the console's own shape
    (the JSON envelope under /api/, the error page elsewhere) before anything reads it. gunicorn is
    started without its own request-line limit (console/run.py), whose answer was an HTML page no
    API client could parse."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.limit = settings.MAX_URL_LENGTH

    def __call__(self, request):
        length = len(request.META.get("PATH_INFO", "")) + len(request.META.get("QUERY_STRING", ""))
        if length > self.limit:
            message = f"The URL is {length:,} characters long; the console reads at most {self.limit:,}."
            if request.META.get("PATH_INFO", "").startswith("/api/"):
                return api_error(414, message, "uri_too_long")
            return error_page(request, 414, message)
        return self.get_response(request)


class RejectNulInPathMiddleware:
    """A NUL in the path (`/decisions/1%00/`) is a 400 before any view runs: PostgreSQL refuses
    NUL in text, so every lookup by a path segment would otherwise fail as a server error."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path_info:
            message = "The path contains a NUL character."
            if request.path_info.startswith("/api/"):
                return api_error(400, message, "invalid_path")
            return error_page(request, 400, message)
        return self.get_response(request)


_TITLES = {
    400: "Bad request",
    403: "Not allowed",
    404: "Not found",
    409: "Conflict",
    413: "Too large",
    414: "Address too long",
    500: "Server error",
}


def error_page(request, status: int, message: str):
    return render(
        request,
        "error.html",
        {"status": status, "title": _TITLES.get(status, "Error"), "message": message},
        status=status,
    )


def _is_api(request) -> bool:
    return request.path_info.startswith("/api/")


def page_not_found(request, exception=None):
    if _is_api(request):
        return api_error(404, "Not found.")
    return error_page(request, 404, _reason(exception) or "There is no page here, or it is not yours to see.")


def permission_denied(request, exception=None):
    if _is_api(request):
        return api_error(403, _reason(exception) or "You do not have permission to do this.")
    return error_page(request, 403, _reason(exception) or "Your role does not allow this page.")


def bad_request(request, exception=None):
    if _is_api(request):
        return api_error(400, "The request could not be understood.", "bad_request")
    return error_page(request, 400, "The request could not be understood.")


def csrf_failure(request, reason: str = ""):
    """settings.CSRF_FAILURE_VIEW: the envelope under /api/ (a client reads JSON, and the API's own
    views check CSRF for signed-in sessions through DRF), Django's own page elsewhere."""
    message = "CSRF verification failed: a signed-in session must send its CSRF token; API clients send a token."
    if _is_api(request):
        return api_error(403, message, "csrf_failed")
    return django_csrf_failure(request, reason=reason)


def server_error(request):
    """handler500: the error envelope under /api/ (clients parse JSON), the site's page elsewhere.
    Django has already logged the traceback; a bare page stands in if the site's page fails too."""
    if _is_api(request):
        return api_error(500, SERVER_ERROR_MESSAGE)
    try:
        return error_page(request, 500, "Something went wrong on our side; the error is logged.")
    except Exception:  # the page itself may need what just failed (the database, a template)
        logger.exception("the error page could not be rendered")
        return HttpResponseServerError("<!doctype html><title>Server error</title><h1>Server error</h1>")


def _reason(exception) -> str:
    """The message a view gave its Http404 or PermissionDenied; an unmatched URL's is internal."""
    if exception is None or isinstance(exception, Resolver404):
        return ""
    return str(exception)


class RequestBodyDecodingMiddleware:
    """API request bodies sent with `Content-Encoding: gzip` or `zstd` are decoded before DRF parses
    them, so a view sees the body as if it came plain.

    The decoded body is bounded like a plain one (DATA_UPLOAD_MAX_MEMORY_SIZE, the setting
    MAX_REQUEST_BYTES): decoding stops one byte past it and answers 413, so a small body that inflates
    to gigabytes (a zip bomb) costs at most that much memory. An encoding the server cannot decode is
    415 `unsupported_content_encoding`; a body that is not what its header says (broken or truncated)
    is 400 `malformed_body`. Pages never get encoded bodies and are left alone.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        header = request.META.get("HTTP_CONTENT_ENCODING", "")
        codings = [c.strip().lower() for c in header.split(",") if c.strip() and c.strip().lower() != "identity"]
        if not codings or not _is_api(request):
            return self.get_response(request)
        unknown = [c for c in codings if c not in body_decoders()]
        if unknown:
            accepted = ", ".join(body_decoders())
            return api_error(
                415,
                f"Content-Encoding {unknown[0]!r} is not accepted; send the body plain or as {accepted}.",
                "unsupported_content_encoding",
            )
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            body = request.body
        except RequestDataTooBig:
            return api_error(413, "The request body is larger than the server accepts.", "too_large")
        if not body:  # nothing to decode (a GET that names an encoding anyway)
            return self.get_response(request)
        for coding in reversed(codings):  # the last coding applied is undone first
            try:
                body = body_decoders()[coding](body, limit)
            except BodyTooLarge:
                return api_error(
                    413, f"The decoded request body is larger than the server accepts ({limit} bytes).", "too_large"
                )
            except ValueError as exc:
                return api_error(400, f"The {coding} request body could not be decoded: {exc}", "malformed_body")
        request._body = body
        request.META["CONTENT_LENGTH"] = str(len(body))
        del request.META["HTTP_CONTENT_ENCODING"]
        return self.get_response(request)


class BodyTooLarge(Exception):
    """A decoded body grew past the limit."""


def _gunzip(data: bytes, limit: int) -> bytes:
    """Every gzip member of `data` (RFC 1952 allows several, one after another), at most `limit` bytes."""
    out = bytearray()
    while True:
        decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += decoder.decompress(data, limit + 1 - len(out))
            while decoder.unconsumed_tail and len(out) <= limit:
                out += decoder.decompress(decoder.unconsumed_tail, limit + 1 - len(out))
        except zlib.error as exc:
            raise ValueError(str(exc)) from None
        if len(out) > limit:
            raise BodyTooLarge
        if not decoder.eof:
            raise ValueError("the gzip stream ends early")
        data = decoder.unused_data
        if not data.strip(b"\x00"):  # some writers pad the end with zeros
            return bytes(out)


def _unzstd(data: bytes, limit: int) -> bytes:
    import zstandard

    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
            out = reader.read(limit + 1)
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None
    if len(out) > limit:
        raise BodyTooLarge
    return out


@functools.cache
def body_decoders() -> dict[str, Callable[[bytes, int], bytes]]:
    """The content codings the API accepts on request bodies: gzip (`x-gzip` is its old name) and zstd."""
    return {"gzip": _gunzip, "x-gzip": _gunzip, "zstd": _unzstd}
