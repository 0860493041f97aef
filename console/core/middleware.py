from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render
from django.urls import Resolver404

from console.core.errors import ServiceError

# Paths anyone may reach: the health check, login, static assets. /api/ authenticates per request
# (401 with the error envelope, never a redirect to a login page).
_OPEN_PREFIXES = ("/favicon.ico", "/healthz", "/accounts/login/", "/static/", "/api/")


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


class ServiceErrorPagesMiddleware:
    """A ServiceError that escapes a page view becomes a page in the site's layout with its status
    and message (403 for Forbidden, 404 for NotFound, ...), so views never translate errors by hand.
    The API answers the same errors in its JSON envelope (console.core.api.exception_handler)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, ServiceError) or request.path_info.startswith("/api/"):
            return None
        return error_page(request, exception.status, exception.message)


_TITLES = {400: "Bad request", 403: "Not allowed", 404: "Not found", 409: "Conflict", 413: "Too large"}


def error_page(request, status: int, message: str):
    return render(request, "error.html", {"status": status, "title": _TITLES.get(status, "Error"),
                                          "message": message}, status=status)


def page_not_found(request, exception=None):
    return error_page(request, 404, _reason(exception) or "There is no page here, or it is not yours to see.")


def permission_denied(request, exception=None):
    return error_page(request, 403, _reason(exception) or "Your role does not allow this page.")


def bad_request(request, exception=None):
    return error_page(request, 400, "The request could not be understood.")


def _reason(exception) -> str:
    """The message a view gave its Http404 or PermissionDenied; an unmatched URL's is internal."""
    if exception is None or isinstance(exception, Resolver404):
        return ""
    return str(exception)
