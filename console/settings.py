"""Settings for the Abstention Review Console.

Everything that varies between machines comes from the environment through the strict parsers
in `console.env`. Without DATABASE_URL the embedded PostgreSQL in CONSOLE_DATA_DIR is started (or
joined); without CELERY_BROKER_URL the broker is the embedded Redis socket in the same folder.
"""

import hashlib
import re
from datetime import timedelta
from pathlib import Path

from celery.schedules import crontab

from console import embedded
from console.env import (
    ConfigError,
    check_oidc_settings,
    email_settings,
    env_bool,
    env_console_url,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_path,
    env_str,
)

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
    "axes",
    "console.accounts",
    "audit",
    "console.ledger",
    "console.verification",
    "console.shadow",
    "console.similarity",
    "grading",
    "console.analysis",
    "console.trials",
    "console.review",
    "console.notify",
    "console.governance",
    "console.disputes",
    "console.monitoring",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # before anything reads an API request's body (README "API": compressed request bodies)
    "console.core.middleware.RequestBodyDecodingMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Each signed-in session's last-seen time and address, for the Security page (once a minute).
    "console.accounts.middleware.UserSessionMiddleware",
    "console.core.middleware.RejectLongUrlMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "console.core.middleware.RejectNulInPathMiddleware",
    "console.core.middleware.LoginRequiredEverywhereMiddleware",
    "console.core.middleware.ServiceErrorPagesMiddleware",
    "console.core.middleware.ContentSecurityPolicyMiddleware",
    # Last, as django-axes asks: it turns a lockout that no page answered into a 429.
    "axes.middleware.AxesMiddleware",
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

# Two roles (console/core/db_roles.py): DATABASE_URL is the app's, which may only add and read
# audit events; DATABASE_OWNER_URL (same server and database) owns the tables and runs migrations.
_database_url = env_str("DATABASE_URL")
_owner_url = env_str("DATABASE_OWNER_URL")
if not _database_url:
    _database_url, _owner_url = embedded.postgres_url(DATA_DIR), embedded.postgres_owner_url(DATA_DIR)
DATABASES = {"default": embedded.database_settings(_database_url)}
DATABASE_OWNER = None
if _owner_url:
    _owner = embedded.database_settings(_owner_url)
    DATABASE_OWNER = {"USER": _owner["USER"], "PASSWORD": _owner["PASSWORD"]}
# Separate test databases let several test runs share one server (e.g. CI beside a developer).
DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME", "test_console")}
# A streaming replica for the heavy reads (console/core/replica.py, README "Scale"): the statistics
# documents, monitoring, the refusals export and similarity read there when it has replayed to within
# DATABASE_REPLICA_MAX_LAG_SECONDS (measured every DATABASE_REPLICA_LAG_CHECK_SECONDS per process);
# writes, reads in a transaction and reads after the request's own write stay on the primary. Unset:
# no replica, every read on the primary. Tests mirror it onto the test database, which is no standby,
# so the suite never reads from it unless a test points it at one.
_replica_url = env_str("DATABASE_REPLICA_URL")
DATABASE_REPLICA_MAX_LAG_SECONDS = env_float("DATABASE_REPLICA_MAX_LAG_SECONDS", 10.0, minimum=0.0, maximum=86400.0)
DATABASE_REPLICA_LAG_CHECK_SECONDS = env_float("DATABASE_REPLICA_LAG_CHECK_SECONDS", 5.0, minimum=0.0, maximum=3600.0)
DATABASE_ROUTERS = ["console.core.replica.ReplicaRouter"]
if _replica_url:
    DATABASES["replica"] = embedded.database_settings(_replica_url)
    # A replica that is down must cost the lag check seconds, not the request: reads then stay on the primary.
    DATABASES["replica"]["OPTIONS"] = {"connect_timeout": 2}
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
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
# The longest path and query string the console reads (a 414 in its own shape past it). The longest
# legitimate URL is a filtered refusals list or export; 8,192 is what most proxies and browsers pass.
MAX_URL_LENGTH = env_int("MAX_URL_LENGTH", 8192, minimum=1024, maximum=1_000_000)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads nothing from it; the token is set on <body>
# Under /api/ a refused CSRF check answers the JSON error envelope, as every other API error does.
CSRF_FAILURE_VIEW = "console.core.middleware.csrf_failure"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Sent on every HTML page (README "Security settings"). Scripts and images come from this site only
# (images also inline as data:, as Swagger UI's icons are); inline styles stay allowed because the
# dashboard's bars, htmx's indicator rule and Swagger UI set them.
CONTENT_SECURITY_POLICY = env_str(
    "CONTENT_SECURITY_POLICY",
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.accounts.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["console.core.parsers.SafeJSONParser"],
    "EXCEPTION_HANDLER": "console.core.api.exception_handler",
    # Per-token call rates (API_TOKEN_RATE_PER_MINUTE below); session calls are not limited.
    "DEFAULT_THROTTLE_CLASSES": ["console.accounts.throttle.TokenRateThrottle"],
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
    # 401/429 where a token is needed, 400/413/415 on every write, 414 everywhere, Retry-After beside 429 and 503
    # (console/core/openapi.py): declared once rather than in each view.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "console.core.openapi.postprocess"],
}

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or embedded.redis_url(DATA_DIR)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A publish happens inside a request (after its transaction commits): a broker that accepts the
# connection but never answers (paused, overloaded) must cost seconds, not the request. socket_timeout
# bounds each command; kombu's publish retries would each wait that long again (three times two
# seconds with one retry), and the Redis client already reconnects a connection the broker dropped,
# so there are none. After a failure console.core.jobs leaves jobs to the sweepers for
# BROKER_BACKOFF_SECONDS instead of waiting on the broker again.
#
# An idle worker waits on the broker with one blocking pop that lasts BROKER_POLL_SECONDS (kombu's
# default is one second, which wakes each worker, and the broker, every second for nothing: a message
# still arrives at once, since the pop returns as soon as any of its queues has one). Messages a
# worker died holding are looked for once a minute; the visibility timeout is an hour anyway.
BROKER_POLL_SECONDS = env_int("BROKER_POLL_SECONDS", 30, minimum=1, maximum=300)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": 3600,
    "socket_connect_timeout": 2,
    "socket_timeout": 2,
    "polling_interval": BROKER_POLL_SECONDS,
    "unacked_restore_interval": 60,
    "unacked_restore_throttle": 1,
}
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 0}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
BROKER_BACKOFF_SECONDS = env_int("BROKER_BACKOFF_SECONDS", 30, minimum=0, maximum=3600)
# One queue per kind of work (console/core/queues.py), routed by task-name prefix; workers name the
# queues they consume with -Q. A task that matched no route would sit on "celery", which no worker reads.
from console.core.queues import task_routes as _task_routes  # noqa: E402

CELERY_TASK_ROUTES = _task_routes()
# Workers that grow are replaced: after this many tasks, or once a child passes this resident size (KiB).
CELERY_WORKER_MAX_TASKS_PER_CHILD = env_int("CELERY_MAX_TASKS_PER_CHILD", 1000, minimum=1, maximum=1_000_000)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = env_int(
    "CELERY_MAX_MEMORY_PER_CHILD_KB", 300_000, minimum=50_000, maximum=16_000_000
)

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
# Span verification is linear in the text; these bound the wall time of one POST /api/v1/verify
# (past it: 503 verify_time_budget) and of one decision in the span-check job (past it: failed).
VERIFY_TIME_BUDGET_MS = env_int("VERIFY_TIME_BUDGET_MS", 2_000, minimum=1, maximum=600_000)
VERIFY_DECISION_BUDGET_MS = env_int("VERIFY_DECISION_BUDGET_MS", 60_000, minimum=1, maximum=3_600_000)
# Span checks commit in groups of decisions holding up to this many bytes of claims and passages (one
# transaction and one audit event per route each); a larger decision is a group of its own. The default
# holds an ingest batch of 500 decisions with five 500-character passages (about 1.4 MB) in one group:
# each group costs four statements, a commit and an audit event.
VERIFY_BATCH_BYTES = env_int("VERIFY_BATCH_BYTES", 2 * 1024 * 1024, minimum=1, maximum=256 * 1024 * 1024)
# The minute pool sweep enters refusals whose shadow run, created this many days ago at most, has
# succeeded; the daily full sweep takes any older.
POOL_SWEEP_SHADOW_DAYS = env_int("POOL_SWEEP_SHADOW_DAYS", 7, minimum=1, maximum=3650)
# The minute span-check sweep looks for lost jobs among this many newest decisions (by id); the
# daily sweep reads every decision. At 3,000 decisions/s that is about a minute of a burst; at 50/s
# about an hour.
VERIFY_SWEEP_NEWEST = env_int("VERIFY_SWEEP_NEWEST", 200_000, minimum=1_000, maximum=100_000_000)
# Span-check jobs take this many decisions each (an ingest batch of 500 makes two), so the gradable
# worker's processes share a batch and its last decisions are checked sooner.
VERIFY_IDS_PER_JOB = env_int("VERIFY_IDS_PER_JOB", 250, minimum=1, maximum=100_000)
# Outbound calls (console/core/outbound.py: shadow pipelines, candidate gates, webhooks, audit
# checkpoints). Loopback, private, link-local, multicast, reserved and metadata addresses are refused
# after resolution unless a network listed here holds them (a metadata address only when listed as
# itself); public addresses are allowed. Proxies from the environment are ignored unless asked for.
OUTBOUND_ALLOWED_NETWORKS = env_networks("OUTBOUND_ALLOWED_NETWORKS")
OUTBOUND_USE_ENV_PROXY = env_bool("OUTBOUND_USE_ENV_PROXY", False)
OUTBOUND_MAX_RESPONSE_BYTES = env_int(
    "OUTBOUND_MAX_RESPONSE_BYTES", 2 * 1024 * 1024, minimum=1024, maximum=256 * 1024 * 1024
)

# A shadow run 'running' this long is presumed dead (its worker was killed) and queued again.
SHADOW_RUN_TIMEOUT_SECONDS = env_int("SHADOW_RUN_TIMEOUT_SECONDS", 900, minimum=1, maximum=24 * 3600)
# Gate trials: a call claimed longer ago than the candidate's timeout plus this is "worker lost" (never made again).
TRIALS_LOST_GRACE_SECONDS = env_int("TRIALS_LOST_GRACE_SECONDS", 30, minimum=1, maximum=3600)
SHADOW_HTTP_TIMEOUT_MS = env_int("SHADOW_HTTP_TIMEOUT_MS", 30_000, minimum=10, maximum=600_000)
SHADOW_HTTP_RETRIES = env_int("SHADOW_HTTP_RETRIES", 2, minimum=0, maximum=10)
SHADOW_HTTP_BACKOFF_MS = env_int("SHADOW_HTTP_BACKOFF_MS", 1_000, minimum=0, maximum=60_000)
# "Header-Name: value", sent to every HTTP shadow pipeline (e.g. "Authorization: Bearer ...").
SHADOW_HTTP_AUTH_HEADER = env_str("SHADOW_HTTP_AUTH_HEADER")
if SHADOW_HTTP_AUTH_HEADER is not None:
    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[ \t]*[^\r\n]+", SHADOW_HTTP_AUTH_HEADER):
        raise ConfigError('SHADOW_HTTP_AUTH_HEADER must look like "Header-Name: value" on one line')
_longest_http_run_ms = (SHADOW_HTTP_RETRIES + 1) * SHADOW_HTTP_TIMEOUT_MS + SHADOW_HTTP_BACKOFF_MS * (
    2**SHADOW_HTTP_RETRIES - 1
)
if _longest_http_run_ms >= SHADOW_RUN_TIMEOUT_SECONDS * 1000:
    raise ConfigError(
        f"SHADOW_RUN_TIMEOUT_SECONDS must exceed the longest HTTP shadow run "
        f"({_longest_http_run_ms / 1000:g} s with the SHADOW_HTTP_* settings), or live runs get re-run"
    )

# Audit checkpoints (audit/checkpoints.py): the chain's head signed with a key kept out of the
# database, appended to a log outside it and optionally posted to a webhook.
AUDIT_SIGNING_KEY = env_str("AUDIT_SIGNING_KEY")  # base64 of a raw 32-byte Ed25519 private key
AUDIT_SIGNING_KEY_FILE = env_path("AUDIT_SIGNING_KEY_FILE", DATA_DIR / "audit-signing-key.pem")
AUDIT_CHECKPOINT_LOG = env_path("AUDIT_CHECKPOINT_LOG", DATA_DIR / "audit-checkpoints.jsonl")
AUDIT_CHECKPOINT_WEBHOOK = env_str("AUDIT_CHECKPOINT_WEBHOOK")
AUDIT_CHECKPOINT_WEBHOOK_TIMEOUT = env_int("AUDIT_CHECKPOINT_WEBHOOK_TIMEOUT", 5, minimum=1, maximum=60)
AUDIT_CHECKPOINT_SECONDS = env_int("AUDIT_CHECKPOINT_SECONDS", 600, minimum=10, maximum=24 * 3600)
if AUDIT_SIGNING_KEY:
    import base64
    import binascii

    try:
        if len(base64.b64decode(AUDIT_SIGNING_KEY, validate=True)) != 32:
            raise ValueError
    except (binascii.Error, ValueError):
        raise ConfigError("AUDIT_SIGNING_KEY must be the base64 of a raw 32-byte Ed25519 private key") from None

# The drift monitor (console/monitoring) runs once a day by default; it reads stored aggregates.
MONITOR_RUN_SECONDS = env_int("MONITOR_RUN_SECONDS", 86400, minimum=60)
# Half-width (points of a share) the recheck sample is sized to reach on the false-abstention rate.
RECHECK_HALF_WIDTH = 0.05
# Labels older than this (days) make a policy's evidence stale.
EVIDENCE_MAX_LABEL_AGE_DAYS = 90

# The daily digest (people who chose one email a day instead of one per event) goes out at this hour, UTC.
NOTIFY_DIGEST_HOUR_UTC = env_int("NOTIFY_DIGEST_HOUR_UTC", 7, minimum=0, maximum=23)

# Every periodic job, in one place, by the stable task names given in each app's tasks.py. The
# sweepers queue again whatever a lost message or a dead worker left behind; stats-refresh
# recomputes the default documents of every route whose decisions or labels changed.
CELERY_BEAT_SCHEDULE = {
    "grading-pool-sweep": {"task": "grading.grading_pool_sweep", "schedule": 60.0},
    "grading-pool-sweep-all": {"task": "grading.grading_pool_sweep_all", "schedule": 86400.0},
    "verification-sweep": {"task": "verification.decisions_verify_sweep", "schedule": float(JOBS_SWEEP_SECONDS)},
    "verification-sweep-all": {"task": "verification.decisions_verify_sweep_all", "schedule": 86400.0},
    "shadow-sweep": {"task": "shadow.shadow_runs_sweep", "schedule": float(JOBS_SWEEP_SECONDS)},
    "stats-refresh": {"task": "analysis.stats_refresh_stale", "schedule": float(JOBS_SWEEP_SECONDS)},
    "notify-sweep": {"task": "notify.notifications_sweep", "schedule": float(JOBS_SWEEP_SECONDS)},
    # One email a day to each person who chose the digest, with what waited for them.
    "notify-digests": {"task": "notify.digests_send", "schedule": crontab(minute=0, hour=NOTIFY_DIGEST_HOUR_UTC)},
    "trials-sweep": {"task": "trials.trials_sweep", "schedule": float(JOBS_SWEEP_SECONDS)},
    "audit-checkpoint": {"task": "audit.audit_checkpoint", "schedule": float(AUDIT_CHECKPOINT_SECONDS)},
    "disputes-escalate": {"task": "disputes.disputes_escalate", "schedule": 60.0},
    "monitoring-daily": {"task": "monitoring.monitor_run", "schedule": float(MONITOR_RUN_SECONDS)},
    # A newer sample of passage text may compress new passages better (console/ledger/services.py).
    "ledger-passage-dictionary": {"task": "ledger.passage_dictionary_build", "schedule": 86400.0},
}
SPECTACULAR_SETTINGS.update(
    {
        "SWAGGER_UI_DIST": "SIDECAR",
        "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
        "REDOC_DIST": "SIDECAR",
    }
)

# Notifications (console/notify). Email goes through Django's email framework: SMTP when EMAIL_URL
# is set, otherwise each message is written as a file into the outbox folder of the data directory.
# Webhooks are JSON POSTs signed with HMAC-SHA256 under NOTIFY_WEBHOOK_SECRET (derived from the
# secret key when unset), retried with exponential back-off up to NOTIFY_MAX_ATTEMPTS.
_email_url = env_str("EMAIL_URL")
if _email_url:
    globals().update(email_settings(_email_url))
else:
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    EMAIL_FILE_PATH = DATA_DIR / "outbox"
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "console@localhost")
NOTIFY_WEBHOOK_SECRET = (
    env_str("NOTIFY_WEBHOOK_SECRET") or hashlib.sha256(f"notify-webhook:{SECRET_KEY}".encode()).hexdigest()
)
NOTIFY_WEBHOOK_TIMEOUT_S = env_int("NOTIFY_WEBHOOK_TIMEOUT_S", 10, minimum=1, maximum=120)
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 5, minimum=1, maximum=20)
NOTIFY_BACKOFF_SECONDS = env_int("NOTIFY_BACKOFF_SECONDS", 30, minimum=0, maximum=3600)
# Where people reach the console: links in emails and webhooks are absolute (console/env.py).
CONSOLE_URL = env_console_url()

# Django's cache is shared by every web worker (a per-process cache would let each gunicorn worker count
# failed sign-ins on its own): the database cache, whose table comes with the accounts migrations.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "django_cache"}}
# Failed sign-ins and bad API tokens (README "Security settings"): once a username or a client address
# has failed this often within the window, its attempts get 429 until the window ends.
LOGIN_FAILURES_PER_USER = env_int("LOGIN_FAILURES_PER_USER", 5, minimum=1, maximum=1000)
LOGIN_FAILURES_PER_CLIENT = env_int("LOGIN_FAILURES_PER_CLIENT", 20, minimum=1, maximum=100_000)
LOGIN_THROTTLE_SECONDS = env_int("LOGIN_THROTTLE_SECONDS", 15 * 60, minimum=1, maximum=24 * 3600)
# django-axes checks those limits on every password (the sign-in page, the sign form): its backend comes
# first in AUTHENTICATION_BACKENDS and its handler counts in console.accounts.throttle's windows (one limit
# per username, another per client, which axes alone cannot express). `manage.py axes_reset_username NAME`
# or `axes_reset_ip ADDRESS` lifts a lockout early.
AXES_ENABLED = True
AXES_HANDLER = "console.accounts.throttle.LoginThrottleHandler"
AXES_FAILURE_LIMIT = LOGIN_FAILURES_PER_USER
AXES_COOLOFF_TIME = timedelta(seconds=LOGIN_THROTTLE_SECONDS)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_CLIENT_IP_CALLABLE = "console.accounts.throttle.client_address"
AXES_LOCKOUT_CALLABLE = "console.accounts.throttle.lockout_response"
# A refused attempt during a lockout does not start its window again (it is not counted at all).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_DISABLE_ACCESS_LOG = True
# Axes' tables stay empty (its handler counts in the cache): no admin pages for them.
AXES_ENABLE_ADMIN = False
AXES_VERBOSE = False
# API calls a minute per token (README "API": rate limits), for tokens without a rate of their own (set on
# the /tokens/ page or with `issue_token --rate`); past it the API answers 429 with Retry-After. 0: no
# limit for those tokens. The default is generous: it stops a runaway client, not a busy integration.
API_TOKEN_RATE_PER_MINUTE = env_int("API_TOKEN_RATE_PER_MINUTE", 6000, minimum=0, maximum=10_000_000)
# Behind a reverse proxy every request comes from the proxy: name the header it appends the client's
# address to (e.g. X-Forwarded-For) and its right-most entry is taken as the client.
CLIENT_IP_HEADER = env_str("CLIENT_IP_HEADER")
if CLIENT_IP_HEADER is not None and not re.fullmatch(r"[A-Za-z0-9-]+", CLIENT_IP_HEADER):
    raise ConfigError(f"CLIENT_IP_HEADER must be a header name such as X-Forwarded-For, got {CLIENT_IP_HEADER!r}")

# Behind TLS (README "Security settings"): cookies only over HTTPS, HSTS, and the header by which the
# TLS-terminating proxy says a request came over HTTPS ("X-Forwarded-Proto: https"). All off by default,
# since `make run` serves plain HTTP on localhost.
SECURE_COOKIES = env_bool("SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_COOKIES
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 0, minimum=0, maximum=2 * 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # load balancers probe over plain HTTP
_proxy_ssl_header = env_str("SECURE_PROXY_SSL_HEADER")
if _proxy_ssl_header is not None:
    _match = re.fullmatch(r"([A-Za-z0-9-]+):[ \t]*(\S+)", _proxy_ssl_header)
    if not _match:
        raise ConfigError('SECURE_PROXY_SSL_HEADER must look like "X-Forwarded-Proto: https"')
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _match[1].upper().replace("-", "_"), _match[2])

# Similarity (console/similarity; README "Similar refusals and corpus gaps").
# A refusal counts as "the same question in similar form" at or above this cosine similarity.
# 0.8 is strict: for the built-in LSA embedder it means near-duplicates (shared wording); for
# sentence-embedding models it is roughly a paraphrase. Lower it for looser matching.
SIMILARITY_SAME_FORM_MIN = env_float("SIMILARITY_SAME_FORM_MIN", 0.8, minimum=0.0, maximum=1.0)
SIMILARITY_SAME_FORM_DEPTH = 200  # neighbours examined for the 30-day count; past it the count says "at least"
SIMILARITY_EF_SEARCH = env_int("SIMILARITY_EF_SEARCH", 100, minimum=10, maximum=1000)
# The HNSW graph's links per node and build-time candidate list (pgvector's m, ef_construction),
# used when a route's index is built: more of either gives recall that holds at a million vectors
# at the price of a slower build (bench/README.md, "Similarity").
# pgvector's defaults (16, 64) left a tenth of the true neighbours unreachable at a million vectors
# (recall@10 0.93); 24 and 128 found all of them in about the same build time under load.
SIMILARITY_HNSW_M = env_int("SIMILARITY_HNSW_M", 24, minimum=2, maximum=100)
SIMILARITY_HNSW_EF_CONSTRUCTION = env_int("SIMILARITY_HNSW_EF_CONSTRUCTION", 128, minimum=4, maximum=1000)
# The candidate list of a vector inserted into a graph already built (an after-ingest job's refusal),
# where SIMILARITY_HNSW_EF_CONSTRUCTION is the bulk build's: pgvector reads it from the index's
# options at each insert. At 2 x m, the least pgvector lets a build take, an insert into a graph
# larger than the shared buffers cost about half of what it did at 128, and queries found the
# vectors so inserted as well (bench/hnsw_insert.py). A refit rebuilds the graph in bulk.
SIMILARITY_HNSW_EF_INSERT = env_int("SIMILARITY_HNSW_EF_INSERT", 2 * SIMILARITY_HNSW_M, minimum=4, maximum=1000)
# The built-in embedder's graph holds the leading SIMILARITY_BUILTIN_GRAPH_DIMENSION of its vectors'
# components (its SVD orders them by variance), and a lookup re-ranks the graph's nearest
# max(SIMILARITY_GRAPH_CANDIDATES, 2 x k) by the whole vector: a refusal's insert into the graph is
# its largest cost under a stream, and half the components made it about a third cheaper with the
# same recall (bench/README.md, "A graph on the leading components"). 0 keeps the whole vector.
# Versions fitted before keep the graph they were built with until their route refits.
SIMILARITY_BUILTIN_GRAPH_DIMENSION = env_int("SIMILARITY_BUILTIN_GRAPH_DIMENSION", 128, minimum=0, maximum=4000)
# A built-in version's graph links each node to SIMILARITY_BUILTIN_HNSW_M others (pgvector's m), and
# a refusal inserted later searches 2 x that many candidates, the least pgvector allows. Its lookups
# take the graph's nearest max(SIMILARITY_GRAPH_CANDIDATES, 2 x k) and re-rank them by the whole
# vector, so the graph need only hold the true neighbours among its candidates, not in order: at 12
# links and 300 candidates a refusal's insert cost a quarter of what 24 links did (the largest cost
# of the work after ingest), lookups found as many true neighbours about a millisecond slower, and
# the graph was a quarter smaller (bench/README.md, "Fewer links in the built-in graph"); at 8 links
# and 600 candidates, on a graph past the buffers, an insert cost 0.6-0.65 of 12 links', lookups
# found as many about 5 ms slower, and a refit's bulk build took a quarter less (bench/README.md,
# "Eight links"). Sent vectors keep SIMILARITY_HNSW_M: their graph is of the whole vector, with no
# re-rank to make up for fewer links.
SIMILARITY_BUILTIN_HNSW_M = env_int("SIMILARITY_BUILTIN_HNSW_M", 8, minimum=2, maximum=100)
SIMILARITY_GRAPH_CANDIDATES = env_int("SIMILARITY_GRAPH_CANDIDATES", 600, minimum=10, maximum=1000)
# An after-ingest job stores its question vectors in this many parts at once, each on a connection
# of its own: one backend inserting refusals into the graph left most of a core idle while the
# vectors fell behind a stream (bench/README.md, "Question vectors stored in parts at once"). 1
# stores them as one statement.
SIMILARITY_EMBED_WRITERS = env_int("SIMILARITY_EMBED_WRITERS", 2, minimum=1, maximum=8)
# maintenance_work_mem for an index build: the HNSW graph of a million 384-dimension vectors
# needs about 2 GB to be built in memory; past it the build goes on, much slower.
SIMILARITY_INDEX_BUILD_MEMORY = env_str("SIMILARITY_INDEX_BUILD_MEMORY", "1GB")
# How long dropping a retired embedder version's partitions waits for the vector table: the detach
# needs it to itself, and lookups queue behind a waiting detach. Past it, the sweeper drops them later.
SIMILARITY_PARTITION_DROP_LOCK_TIMEOUT = "2s"
SIMILARITY_MIN_FIT_QUESTIONS = env_int("SIMILARITY_MIN_FIT_QUESTIONS", 20, minimum=2)
SIMILARITY_FIT_SAMPLE = 10_000  # questions the built-in embedder is fitted on (a random sample)
# A route refits when it has doubled. A version fitted on a route of this many questions or more drew
# its sample from four times the sample's size or more, and a doubled route gives another sample of the
# same size: such a refit re-embeds every question for a model no better informed, so past this size a
# doubled route refits only once its version has been current for SIMILARITY_REFIT_SETTLED_DAYS (the
# route's questions may have moved on to new words by then).
SIMILARITY_REFIT_SETTLED_QUESTIONS = 4 * SIMILARITY_FIT_SAMPLE
SIMILARITY_REFIT_SETTLED_DAYS = env_float("SIMILARITY_REFIT_SETTLED_DAYS", 7.0, minimum=0.0, maximum=365.0)
SIMILARITY_GAPS_WINDOW_DAYS = env_int("SIMILARITY_GAPS_WINDOW_DAYS", 28, minimum=1, maximum=365)
SIMILARITY_GAPS_SAMPLE = 5_000  # refusals clustered directly; the rest join the nearest centre
CELERY_BEAT_SCHEDULE["similarity-gaps"] = {"task": "similarity.gaps_refresh", "schedule": 3600.0}

# Two choice sets share the field name "verdict" (a grade may be unsure, a final label may not):
# name each, so the schema has no generated collision name.
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    "GradeVerdictEnum": ["correct", "incorrect", "unsure"],
    "LabelVerdictEnum": ["correct", "incorrect"],
    "ClaimVerdictEnum": ["supported", "unsupported", "unverifiable"],  # a long answer's claims
    "OpenClosedStatusEnum": ["open", "closed"],  # rechecks and alarms
    "DisputeStatusEnum": ["open", "upheld", "overturned", "withdrawn"],  # disputes, similar refusals
    # a policy version, in full and as a list's summary
    "PolicyVersionStatusEnum": ["draft", "active", "superseded", "withdrawn", "needs_recheck"],
    # what a gate's score estimates for a long answer: on a decision's gate and in a route's settings
    "GateFunctionalEnum": ["expected_support", "p_fully_supported", "p_support_at_least"],
}
# Disputes (console/disputes): the response time a dispute's clock runs on when its route has no
# signed policy with an escalation path, and how many appeals one client may send per window.
DISPUTES_DEFAULT_RESPONSE_HOURS = env_int("DISPUTES_DEFAULT_RESPONSE_HOURS", 72)
APPEALS_PER_CLIENT = env_int("APPEALS_PER_CLIENT", 10)
APPEALS_CLIENT_WINDOW_SECONDS = env_int("APPEALS_CLIENT_WINDOW_SECONDS", 3600)

# Sign-in through an OpenID provider (console/accounts/identity; README "Sign-in with your identity
# provider"). Off unless OIDC_ISSUER is set; the issuer's discovery document gives every endpoint.
OIDC_ISSUER = env_str("OIDC_ISSUER")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
OIDC_ROLES_CLAIM = env_str("OIDC_ROLES_CLAIM", "groups")
OIDC_ALLOW_HTTP = env_bool("OIDC_ALLOW_HTTP", False)
# Where the provider tells no logout (no back-channel logout), a session it opened ends this long after sign-in.
OIDC_MAX_SESSION_SECONDS = env_int("OIDC_MAX_SESSION_SECONDS", 8 * 3600, minimum=60, maximum=30 * 24 * 3600)
# Signing a policy re-authenticates at the provider; the signature must follow within this many seconds.
OIDC_STEP_UP_SECONDS = env_int("OIDC_STEP_UP_SECONDS", 300, minimum=10, maximum=3600)
# 0 refuses local passwords (the sign-in form, the Django admin's) once a provider is configured.
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", True)
if OIDC_ISSUER:
    check_oidc_settings(issuer=OIDC_ISSUER, client_id=OIDC_CLIENT_ID, scopes=OIDC_SCOPES, allow_http=OIDC_ALLOW_HTTP)
# Local passwords go through the first backend, which refuses them (and ends the sessions they opened)
# when LOCAL_LOGIN=0 and a provider is configured; the second loads people who signed in at the provider.
AUTHENTICATION_BACKENDS = [
    "console.accounts.throttle.LoginThrottleBackend",  # django-axes: refuses locked-out usernames and clients
    "console.accounts.backends.LocalPasswordBackend",
    "console.accounts.backends.IdentityProviderBackend",
]
