"""Throttling: of failed sign-ins, per username and per client address; and of API calls, per token
(at the end of this module).

Failed sign-ins are counted in Django's cache (the database cache by default, so every web worker sees the same
counts). A window opens at the first failure and lasts LOGIN_THROTTLE_SECONDS; once a username or
a client has failed its limit within the window, further attempts are refused, right or wrong, until
the window ends. A successful sign-in clears its username's count, never its client's, so an
attacker cannot reset a client's count with an account of their own.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction


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


def record_failure(scope: str, *, username: str | None, address: str) -> None:
    now = time.time()
    for key, _limit in _keys(scope, username=username, address=address):
        window = cache.get(key)
        if not window or window["until"] <= now:
            window = {"failures": 0, "until": now + settings.LOGIN_THROTTLE_SECONDS}
        window["failures"] += 1
        cache.set(key, window, timeout=math.ceil(window["until"] - now))


def clear_username(scope: str, *, username: str) -> None:
    cache.delete(_key(scope, "user", username.strip().casefold()))


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
