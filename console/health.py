from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:
        return False


def _broker_ok() -> bool:
    from kombu import Connection

    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=1) as conn:
            conn.ensure_connection(max_retries=1, timeout=1)
            return True
    except Exception:
        return False


@require_GET
def healthz(request):
    checks = {"database": _database_ok(), "broker": _broker_ok()}
    ok = all(checks.values())
    return JsonResponse({"ok": ok, "checks": checks}, status=200 if ok else 503)
