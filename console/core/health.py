from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from console.core import replica
from console.core.hooks import health_reports

logger = logging.getLogger(__name__)


def _reports() -> tuple[dict[str, bool], dict[str, Any]]:
    checks, details = {}, {}
    for name, report in health_reports().items():
        try:
            ok, detail = report()
        except Exception:  # noqa: BLE001 -- a report that cannot answer must not break the health check
            logger.exception("health report %s failed", name)
            continue
        checks[name] = ok
        if detail:
            details[name] = detail
    return checks, details


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:
        return False


def _broker_ok() -> bool:
    """Ping the broker with a one-second budget, so a dead broker never stalls the health check."""
    url = settings.CELERY_BROKER_URL
    try:
        if url.startswith(("redis://", "rediss://", "redis+socket://")):
            import redis

            if url.startswith("redis+socket://"):
                url = "unix://" + url.removeprefix("redis+socket://")
            return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
        from kombu import Connection

        with Connection(url, connect_timeout=1) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=1)
            return True
    except Exception:
        return False


@require_GET
def healthz(request):
    checks = {"database": _database_ok(), "broker": _broker_ok()}
    serving = all(checks.values())
    reported, details = _reports() if checks["database"] else ({}, {})
    body = {"ok": serving and all(reported.values()), "checks": checks | reported, **details}
    if replica.configured():
        # Reads fall back to the primary while the replica lags or is away, so neither takes the
        # console out of service; the figure says whether the heavy reads are on it.
        body["replica"] = replica.replica_status(refresh=True).as_dict()
    return JsonResponse(body, status=200 if serving else 503)
