"""Each signed-in person's browser sessions, recorded so that the Security page can list and end them
(Django's sessions cannot be listed by user): at sign-in, and then at most once a minute per session."""

from __future__ import annotations

import time

from console.accounts import services, throttle

# The session remembers when its row was last touched, so that a request within the minute reads
# nothing and writes nothing more.
SEEN_KEY = "accounts_seen_at"
TOUCH_SECONDS = 60


def _where(request) -> dict[str, str]:
    return {"user_agent": request.META.get("HTTP_USER_AGENT", ""), "ip_address": throttle.client_address(request)}


def session_signed_in(sender, request, user, **kwargs) -> None:
    """Receiver of Django's `user_logged_in` (as Django's own last_login stamp is): every way in (the
    sign-in page, the identity provider, the test client's `force_login`) records its session."""
    session = getattr(request, "session", None)
    if session is None or not session.session_key:
        return
    services.user_session_record(user=user, session_key=session.session_key, **_where(request))
    session[SEEN_KEY] = int(time.time())


class UserSessionMiddleware:
    """Moves a signed-in session's last-seen time and address on, at most once a minute. After the
    view, so that a sign-out in this request touches nothing."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        session = getattr(request, "session", None)
        # The session key first: an API call with a token and no cookie loads no session here.
        if session is not None and session.session_key and request.user.is_authenticated:
            seen, now = session.get(SEEN_KEY), time.time()
            if not isinstance(seen, int) or now - seen >= TOUCH_SECONDS:
                services.user_session_touch(user=request.user, session_key=session.session_key, **_where(request))
                session[SEEN_KEY] = int(now)
        return response
