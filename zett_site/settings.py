"""Settings for zett, read from the environment with embedded defaults.

With no environment at all the site runs on a fresh machine: a SQLite file next to
``manage.py``, the in-memory channel layer, the offline demo model and debug mode. Each
service is switched on by one variable:

=======================  ===============================================================
``DATABASE_URL``         any dj-database-url URL, e.g. ``postgres://user@host/db``
``ZETT_DB_POOL_SIZE``    most PostgreSQL connections the process opens (default 10)
``REDIS_URL``            ``redis://host:6379/0`` → channels_redis instead of in-memory
``ZETT_MODEL``           ``demo`` | ``openai:<model>`` | ``anthropic:<model>`` |
                         ``package.module:factory`` (a callable returning a model)
``ZETT_DEMO_PACE``       seconds between the demo model's words (default 0.02)
``DJANGO_SECRET_KEY``    required in production; setting it also turns debug off by default
``DJANGO_DEBUG``         ``1``/``true``/``yes`` or ``0``/``false``/``no``
``DJANGO_ALLOWED_HOSTS`` comma-separated host names
``ZETT_ALLOWED_ORIGINS`` comma-separated ``scheme://host[:port]`` allowed to open sockets
``ZETT_REQUIRE_LOGIN``   ``1`` → only signed-in users may chat
``ZETT_MCP_SERVERS``     site-wide MCP servers, the ``mcpServers`` JSON (docs/mcp.md)
``ZETT_MCP_ALLOWED_COMMANDS`` comma-separated executables those stdio servers may run
``ZETT_WEBHOOK_ALLOW_PRIVATE`` ``1`` → webhooks may call private and loopback addresses
``ZETT_WEBHOOK_TIMEOUT`` seconds one webhook delivery attempt may take (default 10)
=======================  ===============================================================

The limits per person (``ZETT_WS_*``, ``ZETT_MAX_CHATS_PER_HOUR``) are described in
docs/security.md; ``agent_app.checks`` validates them and the other zett settings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name} must be one of {sorted(_TRUE | _FALSE)}, got {raw!r}")


def _env_json(name: str) -> object:
    """The variable as JSON (None when unset or empty); unreadable JSON stays text."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _env_number(name: str, default: str, kind: type[int] | type[float]) -> int | float | str:
    """The variable as a number; an unreadable value is kept as text for the system check
    (``agent_app.checks``), which names the variable, instead of failing the import."""
    raw = os.environ.get(name, default).strip()
    try:
        return kind(raw)
    except ValueError:
        return raw


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# The fallback key is for local development only: its name says so, and leaving it in
# place keeps DEBUG on, which no production deployment should run with.
_DEV_SECRET_KEY = "django-insecure-zett-development-key-do-not-use-in-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or _DEV_SECRET_KEY
DEBUG = _env_bool("DJANGO_DEBUG", default=SECRET_KEY == _DEV_SECRET_KEY)
ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")

INSTALLED_APPS = [
    # First, so that ``runserver`` is Daphne's ASGI server (websockets included).
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "agent_app",
    # The example site itself: its assistants module declares the demo assistant.
    "zett_site",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "agent_app.guard.headers.SecurityHeadersMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Static files in every mode, from any server (daphne, uvicorn, ``runworkers``): with
    # DEBUG straight from the apps' static folders, re-read on change; without it from
    # STATIC_ROOT (``manage.py collectstatic``). Last, because it is sync-only: under ASGI
    # Django then runs the whole stack in one trip to a worker thread. Anywhere above
    # async-capable middlewares it costs a thread switch each way for each of their methods
    # (about a dozen per request): an AG-UI POST's first byte came 2-8 ms later.
    "whitenoise.middleware.WhiteNoiseMiddleware",
]

ROOT_URLCONF = "zett_site.urls"
WSGI_APPLICATION = "zett_site.wsgi.application"
ASGI_APPLICATION = "zett_site.asgi.application"

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
            ],
        },
    },
]

DATABASES = {"default": dj_database_url.config(default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
# Connections. Every socket's ORM work runs in one worker thread (Channels'
# ``database_sync_to_async``), several times per agent request: opening a connection for
# each call was a sizeable share of a request's cost. But under ASGI each HTTP request runs
# its ORM calls in a thread of its own (kept for later requests by the site's handler,
# ``agent_app.process.request_threads``, which closes its connections at each request's
# end), where a persistent connection (CONN_MAX_AGE) is never reused. So PostgreSQL uses Django's
# psycopg pool (CONN_MAX_AGE stays 0: closing hands the connection back to the pool), and
# SQLite, which has no pool and whose connection is a file handle, keeps connections open
# with a health check before reuse.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].update(CONN_MAX_AGE=600, CONN_HEALTH_CHECKS=True)
    # Agent runs write from worker threads while pages read: wait for the lock instead of
    # failing at once with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # Write-ahead logging: readers never wait for the writer, and a commit is one append
    # (synchronous=NORMAL keeps every committed row through a process crash; only a power
    # cut may lose the last commits). Write transactions take the lock when they begin, so
    # two of them never deadlock upgrading a read lock.
    DATABASES["default"]["OPTIONS"].update(
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        transaction_mode="IMMEDIATE",
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": int(os.environ.get("ZETT_DB_POOL_SIZE", "10")),
        # A request that finds every connection busy fails after this long instead of hanging.
        "timeout": 10,
    }

_REDIS_URL = os.environ.get("REDIS_URL", "").strip()
#: With Redis, any number of worker processes serve any session (``agent_app.bus.redis``):
#: run leases, fan-out over the channel layer, the shared replay stream.
ZETT_REDIS_URL = _REDIS_URL or None
#: Seconds a worker's run lease lasts unrenewed: a dead worker's run is settled this long
#: after it died, at the latest.
ZETT_LEASE_SECONDS = float(os.environ.get("ZETT_LEASE_SECONDS", "10"))
#: On SIGTERM, stop taking runs and let those going finish (``agent_app.process.shutdown``)...
ZETT_GRACEFUL_SHUTDOWN = _env_bool("ZETT_GRACEFUL_SHUTDOWN", default=True)
#: ...for at most this many seconds; the rest are paused (waiting) or handed over.
ZETT_SHUTDOWN_GRACE = float(os.environ.get("ZETT_SHUTDOWN_GRACE", "25"))
#: Workers a run may have: one whose worker died is continued until this many ran it.
ZETT_RUN_ATTEMPTS = int(os.environ.get("ZETT_RUN_ATTEMPTS", "3"))
#: redis-py's read timeout; the pub/sub layer reads with short timeouts of its own.
REDIS_SOCKET_TIMEOUT = 15
#: ``pubsub`` (the default) or ``core``: which of channels_redis's layers carries the
#: fan-out. Both work; the pub/sub one sends each group message with one ``PUBLISH``.
_REDIS_LAYER = os.environ.get("ZETT_REDIS_CHANNEL_LAYER", "pubsub").strip() or "pubsub"
if _REDIS_URL:
    # channels_redis's pub/sub layer: one PUBLISH per group message, delivered in order,
    # no per-channel capacity that would drop frames of a fast run.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": (
                "channels_redis.core.RedisChannelLayer"
                if _REDIS_LAYER == "core"
                else "channels_redis.pubsub.RedisPubSubChannelLayer"
            ),
            "CONFIG": {"hosts": [{"address": _REDIS_URL, "socket_timeout": REDIS_SOCKET_TIMEOUT}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")
# WhiteNoise's own defaults, fixed when the settings load (a test runner that turns DEBUG
# off later keeps them): with DEBUG, the apps' static folders, re-read on every change.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
# Compressed copies, unhashed names: the page's ES modules import each other by relative
# path, which hashed names would break.
# Attachments are stored through the default storage: these files on one machine; with
# several machines, a shared storage (django-storages: S3, GCS, Azure) in STORAGES.
MEDIA_ROOT = Path(os.environ.get("DJANGO_MEDIA_ROOT") or BASE_DIR / "media")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Django's own login and logout views for every user (``zett_site.urls``); the admin keeps
# its own login page for staff.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "agent_app:session_list"
LOGOUT_REDIRECT_URL = "agent_app:session_list"

# --- zett -----------------------------------------------------------------------------

#: Which model answers: resolved by ``agent_app.agents.factory`` when a session's first request
#: builds its agent.
ZETT_MODEL = os.environ.get("ZETT_MODEL", "demo").strip() or "demo"
#: More assistants to register, as dotted paths (besides installed apps' assistants.py).
ZETT_ASSISTANTS = _env_list("ZETT_ASSISTANTS", "")
#: The assistant a new chat talks to when it names none (``zett_site.assistants``).
ZETT_DEFAULT_ASSISTANT = os.environ.get("ZETT_DEFAULT_ASSISTANT", "demo").strip() or "demo"
#: When people of the team answer, in words shown to a person who asks for one (unset: none).
ZETT_SUPPORT_HOURS = os.environ.get("ZETT_SUPPORT_HOURS", "").strip() or None
#: Seconds the demo model waits between streamed words, so the page visibly streams.
ZETT_DEMO_PACE = float(os.environ.get("ZETT_DEMO_PACE", "0.02"))
#: Seconds a question or approval waits for its answer (0 = no deadline).
ZETT_REPLY_TIMEOUT = float(os.environ.get("ZETT_REPLY_TIMEOUT", "3600") or 0)
# Seconds a host-page tool waits for a page to run it (0: no deadline).
ZETT_BROWSER_TOOL_TIMEOUT = float(os.environ.get("ZETT_BROWSER_TOOL_TIMEOUT", "30") or 0)
#: Most messages the ``session`` frame carries (older ones are paged in).
ZETT_HISTORY_PAGE = int(os.environ.get("ZETT_HISTORY_PAGE", "50"))
#: Frames of an active run kept for replay before its deltas are merged.
ZETT_REPLAY_FRAMES = int(os.environ.get("ZETT_REPLAY_FRAMES", "10000"))
#: Only signed-in users may chat (pages redirect to LOGIN_URL, sockets are refused).
ZETT_REQUIRE_LOGIN = _env_bool("ZETT_REQUIRE_LOGIN", default=False)
#: Page origins allowed to open a socket, as ``scheme://host[:port]``; empty: the socket's
#: own origin, with its host in ALLOWED_HOSTS (``agent_app.guard.origins``).
ZETT_ALLOWED_ORIGINS = _env_list("ZETT_ALLOWED_ORIGINS", "")
#: Frame budget per person (a user, or an anonymous browser) across all their sockets: a
#: burst of ``burst`` frames, refilled at ``per_second`` (``agent_app.guard.limits``).
ZETT_WS_RATE_LIMIT = {
    "burst": _env_number("ZETT_WS_RATE_BURST", "60", int),
    "per_second": _env_number("ZETT_WS_RATE_PER_SECOND", "20", float),
}
#: Most sockets open at once on one chat, and by one person (counted per worker process).
ZETT_WS_MAX_SOCKETS_PER_SESSION = _env_number("ZETT_WS_MAX_SOCKETS_PER_SESSION", "20", int)
ZETT_WS_MAX_SOCKETS_PER_PERSON = _env_number("ZETT_WS_MAX_SOCKETS_PER_PERSON", "50", int)
#: The Content-Security-Policy of every page (``agent_app.guard.headers``); unset: the strict
#: default, empty: none.
ZETT_CONTENT_SECURITY_POLICY = os.environ.get("ZETT_CONTENT_SECURITY_POLICY")
#: Most bytes a socket may leave unread before it is dropped (``agent_app.sessions.backpressure``).
ZETT_WS_SEND_BUFFER_BYTES = _env_number("ZETT_WS_SEND_BUFFER_BYTES", "1048576", int)
#: Seconds a request body to zett's endpoints may send nothing before it is refused (408).
ZETT_REQUEST_BODY_TIMEOUT = _env_number("ZETT_REQUEST_BODY_TIMEOUT", "15", float)
#: Bodies Django keeps in memory: a form or JSON body over 2.5 MB is refused (Django's
#: default, said here), and an uploaded file over 1 MiB is spooled to a temporary file
#: instead of memory. zett refuses larger bodies by their Content-Length before reading
#: them (``agent_app.guard.bodies``).
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
#: Most chats one person may start in an hour (counted in the database).
ZETT_MAX_CHATS_PER_HOUR = _env_number("ZETT_MAX_CHATS_PER_HOUR", "60", int)
#: Site-wide MCP servers: the ``mcpServers`` JSON text (see docs/mcp.md).
ZETT_MCP_SERVERS = os.environ.get("ZETT_MCP_SERVERS", "")
if os.environ.get("ZETT_MCP_ALLOWED_COMMANDS", "").strip():
    ZETT_MCP_ALLOWED_COMMANDS = _env_list("ZETT_MCP_ALLOWED_COMMANDS", "")
#: Where the frame budgets are shared between worker processes; empty: in each process.
ZETT_LIMITS_REDIS_URL = os.environ.get("ZETT_LIMITS_REDIS_URL", _REDIS_URL or "")
#: OpenTelemetry spans (``1``), with content (``ZETT_OTEL_CONTENT=1``): to the global tracer
#: provider, which the deployment configures (``docs/operations.md``).
ZETT_OTEL = _env_bool("ZETT_OTEL", default=False)
ZETT_OTEL_CONTENT = _env_bool("ZETT_OTEL_CONTENT", default=False)
#: A bearer token for Prometheus scrapers of ``/metrics`` (staff users need none).
ZETT_METRICS_TOKEN = os.environ.get("ZETT_METRICS_TOKEN", "").strip()
#: Tokens per person per day (``agent_app.budgets``), as JSON, e.g.
#: ``{"user": 200000, "anonymous": 20000, "groups": {"staff": null}}``; unset: no budgets.
#: Text that is not JSON is kept as text, for the system check to name.
ZETT_TOKEN_BUDGETS = _env_json("ZETT_TOKEN_BUDGETS")
#: Webhooks to private and loopback addresses (a receiver on this machine or network).
ZETT_WEBHOOK_ALLOW_PRIVATE = _env_bool("ZETT_WEBHOOK_ALLOW_PRIVATE", default=False)
#: Seconds one webhook delivery attempt may take.
ZETT_WEBHOOK_TIMEOUT = float(os.environ.get("ZETT_WEBHOOK_TIMEOUT", "10"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "agent_app": {"handlers": ["console"], "level": os.environ.get("ZETT_LOG_LEVEL", "INFO")},
    },
}
