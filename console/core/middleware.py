import logging

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseServerError
from django.shortcuts import render
from django.urls import Resolver404
from django.views.csrf import csrf_failure as django_csrf_failure

from console.core.api import SERVER_ERROR_MESSAGE, api_error
from console.core.errors import ServiceError

logger = logging.getLogger(__name__)

# Paths anyone may reach: the health check, login, static assets. /api/ authenticates per request
# (401 with the error envelope, never a redirect to a login page).
_OPEN_PREFIXES = ("/favicon.ico", "/healthz", "/accounts/login/", "/static/", "/api/", "/appeal/")


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
