"""Throttling: of failed sign-ins, per username and per client address; and of API calls, per token
(at the end of this module).

Password checks (the sign-in page and the sign form's password) go through django-axes: its
authentication backend (`LoginThrottleBackend`, first in AUTHENTICATION_BACKENDS) refuses every
attempt while the username or the client is locked out, Django's `user_login_failed` signal counts
each failure through the handler axes is configured with (`LoginThrottleHandler`, AXES_HANDLER), and
`manage.py axes_reset_username NAME` / `axes_reset_ip ADDRESS` lift a lockout early. The handler
keeps axes' contract but counts in the windows below, because axes has one failure limit for every
lockout parameter, and the console has one per username (LOGIN_FAILURES_PER_USER) and a larger one
per client (LOGIN_FAILURES_PER_CLIENT: an office behind one address has many people).

Failed sign-ins are counted in Django's cache (the database cache by default, so every web worker sees the same
counts). A window opens at the first failure and lasts LOGIN_THROTTLE_SECONDS; once a username or
a client has failed its limit within the window, further attempts are refused, right or wrong, until
the window ends. A successful sign-in clears its username's count, never its client's, so an
attacker cannot reset a client's count with an account of their own. The failure that uses up a
limit is audited (`sign_in_locked_out`); refused attempts after it are not (they change nothing).
Bad API tokens are counted in the same windows per client (scope "api-token"), apart from passwords.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from axes.backends import AxesStandaloneBackend
from axes.handlers.base import AbstractAxesHandler, AxesBaseHandler
from axes.helpers import get_client_username
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.http import HttpResponse

from console.accounts.services import sign_in_lockout_record


@dataclass(frozen=True)
class Throttled:
    """Attempts are refused for `retry_after` more seconds."""

    retry_after: int

    @property
    def message(self) -> str:
        minutes = max(1, math.ceil(self.retry_after / 60))
        return f"Too many failed attempts; try again in {minutes} minute{'s' if minutes != 1 else ''}."


def client_address(request) -> str:
    """The client's address: REMOTE_ADDR, or behind a proxy the right-most entry of the header named
    in CLIENT_IP_HEADER (the one the proxy itself appended, which the client cannot forge)."""
    header = settings.CLIENT_IP_HEADER
    if header:
        forwarded = request.META.get("HTTP_" + header.upper().replace("-", "_"), "")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-1]
    return request.META.get("REMOTE_ADDR", "")


def _keys(scope: str, *, username: str | None, address: str) -> list[tuple[str, int]]:
    """(cache key, limit) of each counter an attempt counts against; usernames fold case as sign-in does not,
    so `Admin` and `admin` share one count."""
    keys = [(_key(scope, "client", address), settings.LOGIN_FAILURES_PER_CLIENT)]
    if username is not None:
        keys.append((_key(scope, "user", username.strip().casefold()), settings.LOGIN_FAILURES_PER_USER))
    return keys


def _key(scope: str, kind: str, value: str) -> str:
    return f"throttle:{scope}:{kind}:{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()}"


@contextmanager
def one_attempt_at_a_time(scope: str, *, username: str | None, address: str) -> Iterator[None]:
    """Hold the counters an attempt reads and writes (its username's and its client's) until it is
    recorded: transaction-scoped advisory locks, taken in key order, around check and count.

    The counts live in the cache, read and written apart; attempts sent at once all read the count
    before any wrote it, and 12 wrong passwords got past a limit of 5. Under these locks the next
    attempt on the same username or client waits for this one to be counted, so a limit holds.
    Raise nothing inside: an exception would roll the count back with the lock's transaction."""
    keys = sorted(key for key, _limit in _keys(scope, username=username, address=address))
    with transaction.atomic():
        with connection.cursor() as cursor:
            for key in keys:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])
        yield


def count_within(key: str, *, limit: int, window_seconds: int) -> bool:
    """Count one event under `key` in a window that opens at its first event; False once more than
    `limit` events fell in the window. Atomic across processes (an advisory lock on the key)."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])
        now = time.time()
        window = cache.get(key)
        if not window or window["until"] <= now:
            window = {"events": 0, "until": now + window_seconds}
        window["events"] += 1
        cache.set(key, window, timeout=math.ceil(window["until"] - now))
        return window["events"] <= limit


def blocked(scope: str, *, username: str | None, address: str) -> Throttled | None:
    """Throttled when the username or the client has used up its failures in the current window."""
    now = time.time()
    waits = [
        math.ceil(window["until"] - now)
        for key, limit in _keys(scope, username=username, address=address)
        if (window := cache.get(key)) and window["failures"] >= limit and window["until"] > now
    ]
    return Throttled(retry_after=max(waits)) if waits else None


@dataclass(frozen=True)
class LimitReached:
    """A failure used up the last attempt of a username's or a client's window."""

    kind: str  # "user" or "client"
    failures: int
    until: float


def record_failure(scope: str, *, username: str | None, address: str) -> list[LimitReached]:
    """Count one failure against the username and the client; returns the limits it used up (the
    lockouts it began), at most one per counter and window."""
    now = time.time()
    reached = []
    for kind, (key, limit) in zip(("client", "user"), _keys(scope, username=username, address=address), strict=False):
        window = cache.get(key)
        if not window or window["until"] <= now:
            window = {"failures": 0, "until": now + settings.LOGIN_THROTTLE_SECONDS}
        window["failures"] += 1
        cache.set(key, window, timeout=math.ceil(window["until"] - now))
        if window["failures"] == limit:
            reached.append(LimitReached(kind=kind, failures=window["failures"], until=window["until"]))
    return reached


def clear_username(scope: str, *, username: str) -> None:
    cache.delete(_key(scope, "user", username.strip().casefold()))


def clear_client(scope: str, *, address: str) -> None:
    cache.delete(_key(scope, "client", address))


# --- django-axes: the sign-in's backend, handler and lockout answer --------------------------------

LOGIN_SCOPE = "login"


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' backend, first in AUTHENTICATION_BACKENDS: refuses a locked-out username or client before
    any password is checked. A call without a request (Django's test client `login()`, the shell) has
    no client to count against and is let through to the password backends, which do not throttle."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class LoginThrottleHandler(AbstractAxesHandler, AxesBaseHandler):
    """Axes' handler (AXES_HANDLER) over this module's windows: a limit per username and another per
    client, and the failure that reaches a limit audited. Axes' own tables stay empty."""

    def is_locked(self, request, credentials: dict | None = None) -> bool:
        username = get_client_username(request, credentials)
        return blocked(LOGIN_SCOPE, username=username, address=client_address(request)) is not None

    def get_failures(self, request, credentials: dict | None = None) -> int:
        username = get_client_username(request, credentials)
        now = time.time()
        counts = [
            window["failures"]
            for key, _limit in _keys(LOGIN_SCOPE, username=username, address=client_address(request))
            if (window := cache.get(key)) and window["until"] > now
        ]
        return max(counts, default=0)

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs) -> None:
        # An attempt refused by the lockout is not counted again: the window would never end.
        if request is None or getattr(request, "axes_locked_out", False):
            return
        if self.is_whitelisted(request, credentials):
            return
        username = get_client_username(request, credentials)
        address = client_address(request)
        for reached in record_failure(LOGIN_SCOPE, username=username, address=address):
            sign_in_lockout_record(
                username=username or "",
                address=address,
                by=reached.kind,
                failures=reached.failures,
                until=reached.until,
            )

    def user_logged_in(self, sender, request, user, **kwargs) -> None:
        clear_username(LOGIN_SCOPE, username=user.get_username())

    def user_logged_out(self, sender, request, user, **kwargs) -> None:
        return None

    def reset_attempts(
        self, *, ip_address: str | None = None, username: str | None = None, ip_or_username: bool = False
    ) -> int:
        """`manage.py axes_reset_username` / `axes_reset_ip`: end a username's or a client's lockout."""
        count = 0
        if username is not None:
            clear_username(LOGIN_SCOPE, username=username)
            count += 1
        if ip_address is not None:
            clear_client(LOGIN_SCOPE, address=ip_address)
            count += 1
        return count


def locked_out(request, *, username: str | None) -> Throttled | None:
    """The lockout that refused this request's password check (axes flagged it), with its wait."""
    if not getattr(request, "axes_locked_out", False):
        return None
    return blocked(LOGIN_SCOPE, username=username, address=client_address(request)) or Throttled(retry_after=1)


def lockout_response(request, original_response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE. The console's pages answer a lockout themselves (429, the message,
    Retry-After); any other page that checked a password (Django's admin sign-in) gets this answer."""
    if original_response is not None and original_response.status_code == 429:
        return original_response
    throttled = locked_out(request, username=get_client_username(request, credentials)) or Throttled(retry_after=1)
    response = HttpResponse(throttled.message, status=429, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(throttled.retry_after)
    return response


# --- per-token call rates -------------------------------------------------------------------------
#
# Each token may make `rate_per_minute` calls a minute (API_TOKEN_RATE_PER_MINUTE when it has no rate
# of its own), as a generic cell rate algorithm (GCRA): the token keeps one instant,
# `rate_allowance_at`, where its calls so far would end if spaced 60/rate seconds apart. A call moves
# it one spacing on (from now, if it lay in the past) and is refused when that would put it more than
# a minute ahead of now: so an idle token may spend a whole minute's calls at once, and then one per
# spacing; a refused call moves nothing, and `Retry-After` is when the next one fits.
#
# The count lives in the token's row, and moves in the same statement that finds the token for
# authentication (console.accounts.authentication): every gunicorn worker sees the same count, with
# no query added to any request (the database cache would add three) and no other service to reach.
# The row is locked for that one statement only (API requests run in autocommit until a service
# opens its transaction), so concurrent calls of one token queue for a moment and never lose a count.

RATE_WINDOW_SECONDS = 60


class TokenRateThrottle:
    """DRF's throttle for token-authenticated calls: reads what authentication counted."""

    def allow_request(self, request, view) -> bool:
        self._wait = getattr(request.auth, "rate_wait_seconds", 0.0) if request.auth is not None else 0.0
        return self._wait <= 0

    def wait(self) -> float:
        return self._wait
