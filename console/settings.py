"""Settings for the Abstention Review Console.

Everything that varies between machines comes from the environment through the strict parsers
in `console.env`. Without DATABASE_URL the embedded PostgreSQL in CONSOLE_DATA_DIR is started (or
joined); without CELERY_BROKER_URL the broker is the embedded Redis socket in the same folder.
"""

import re
from pathlib import Path

from console import embedded
from console.env import ConfigError, env_bool, env_int, env_list, env_path, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env_path("CONSOLE_DATA_DIR", BASE_DIR / ".console")

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    # A per-installation key kept beside the data, so sessions survive restarts of `make run`.
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    _key_file = DATA_DIR / "secret_key"
    if not _key_file.exists():
        import secrets

        _key_file.write_text(secrets.token_urlsafe(50))
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "console.accounts",
    "audit",
    "console.ledger",
    "console.verification",
    "console.shadow",
    "grading",
    "console.analysis",
    "console.review",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "console.core.middleware.LoginRequiredEverywhereMiddleware",
    "console.core.middleware.ServiceErrorPagesMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.accounts.context_processors.roles",
            ],
        },
    },
]

_database_url = env_str("DATABASE_URL") or embedded.postgres_url(DATA_DIR)
DATABASES = {"default": embedded.database_settings(_database_url)}
# Separate test databases let several test runs share one server (e.g. CI beside a developer).
DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME", "test_console")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True

# A batch of 1,000 decisions with their passages can be large; bigger bodies get 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BYTES", 64 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10_000

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads nothing from it; the token is set on <body>
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.accounts.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "console.core.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Abstention Review Console API",
    "DESCRIPTION": "Gated decisions, span verification, grading, operating points and audit.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
}

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or embedded.redis_url(DATA_DIR)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "socket_connect_timeout": 2}
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
}

INGEST_MAX_BATCH = 1000

# Blind grading: how long a grader holds an item before it returns to the queue for others.
GRADING_LEASE_SECONDS = env_int("GRADING_LEASE_SECONDS", 15 * 60, minimum=10, maximum=24 * 3600)

# Span verification and shadow evaluation jobs (README "Background jobs").
# The sweepers run every JOBS_SWEEP_SECONDS and queue again what has waited JOBS_REQUEUE_AFTER_SECONDS.
JOBS_SWEEP_SECONDS = env_int("JOBS_SWEEP_SECONDS", 60, minimum=1, maximum=3600)
JOBS_REQUEUE_AFTER_SECONDS = env_int("JOBS_REQUEUE_AFTER_SECONDS", 300, minimum=1, maximum=7 * 24 * 3600)
# A shadow run 'running' this long is presumed dead (its worker was killed) and queued again.
SHADOW_RUN_TIMEOUT_SECONDS = env_int("SHADOW_RUN_TIMEOUT_SECONDS", 900, minimum=1, maximum=24 * 3600)
SHADOW_HTTP_TIMEOUT_MS = env_int("SHADOW_HTTP_TIMEOUT_MS", 30_000, minimum=10, maximum=600_000)
SHADOW_HTTP_RETRIES = env_int("SHADOW_HTTP_RETRIES", 2, minimum=0, maximum=10)
SHADOW_HTTP_BACKOFF_MS = env_int("SHADOW_HTTP_BACKOFF_MS", 1_000, minimum=0, maximum=60_000)
# "Header-Name: value", sent to every HTTP shadow pipeline (e.g. "Authorization: Bearer ...").
SHADOW_HTTP_AUTH_HEADER = env_str("SHADOW_HTTP_AUTH_HEADER")
if SHADOW_HTTP_AUTH_HEADER is not None:
    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[ \t]*[^\r\n]+", SHADOW_HTTP_AUTH_HEADER):
        raise ConfigError('SHADOW_HTTP_AUTH_HEADER must look like "Header-Name: value" on one line')
_longest_http_run_ms = (SHADOW_HTTP_RETRIES + 1) * SHADOW_HTTP_TIMEOUT_MS + SHADOW_HTTP_BACKOFF_MS * (
    2**SHADOW_HTTP_RETRIES - 1)
if _longest_http_run_ms >= SHADOW_RUN_TIMEOUT_SECONDS * 1000:
    raise ConfigError(f"SHADOW_RUN_TIMEOUT_SECONDS must exceed the longest HTTP shadow run "
                      f"({_longest_http_run_ms / 1000:g} s with the SHADOW_HTTP_* settings), or live runs get re-run")

# Every periodic job, in one place, by the stable task names given in each app's tasks.py. The
# sweepers queue again whatever a lost message or a dead worker left behind; stats-refresh
# recomputes the default documents of every route whose decisions or labels changed.
CELERY_BEAT_SCHEDULE = {
    "grading-pool-sweep": {"task": "grading.grading_pool_sweep", "schedule": 60.0},
    "verification-sweep": {"task": "verification.decisions_verify_sweep", "schedule": float(JOBS_SWEEP_SECONDS)},
    "shadow-sweep": {"task": "shadow.shadow_runs_sweep", "schedule": float(JOBS_SWEEP_SECONDS)},
    "stats-refresh": {"task": "analysis.stats_refresh_stale", "schedule": float(JOBS_SWEEP_SECONDS)},
}
SPECTACULAR_SETTINGS.update(
    {
        "SWAGGER_UI_DIST": "SIDECAR",
        "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
        "REDOC_DIST": "SIDECAR",
    }
)
# Two choice sets share the field name "verdict" (a grade may be unsure, a final label may not):
# name each, so the schema has no generated collision name.
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    "GradeVerdictEnum": ["correct", "incorrect", "unsure"],
    "LabelVerdictEnum": ["correct", "incorrect"],
}
