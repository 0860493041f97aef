from django.conf import settings
from django.contrib.auth.views import redirect_to_login

# Paths anyone may reach: the health check, login, static assets. /api/ authenticates per request
# (401 with the error envelope, never a redirect to a login page).
_OPEN_PREFIXES = ("/healthz", "/accounts/login/", "/static/", "/api/")


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
