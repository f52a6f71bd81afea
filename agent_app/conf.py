"""Every ``ZETT_*`` setting and its one default.

A project sets only what it wants to change, in its Django settings; everything else reads
through here: ``from agent_app import conf`` then ``conf.ZETT_REPLY_TIMEOUT``. The value is
looked up in ``django.conf.settings`` at each access, so ``override_settings`` in tests takes
effect at once. ``manage.py check`` validates them all (``agent_app.checks``).

``ZETT_OPENAI_BASE_URL`` is the one setting with a second source: when the Django setting
is absent, the environment variable of that name is used (the variable the OpenAI-compatible
servers' own guides tell people to export).
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings

__all__ = ["DEFAULTS", "setting"]

DEFAULTS: dict[str, Any] = {
    # The model: "demo" (offline), "openai:<model>", "openai-compatible:<model>",
    # "anthropic:<model>" or "package.module:attribute".
    "ZETT_MODEL": "demo",
    #: Seconds between the demo model's streamed words.
    "ZETT_DEMO_PACE": 0.02,
    #: The /v1 URL of an OpenAI-compatible server (None: OpenAI itself).
    "ZETT_OPENAI_BASE_URL": None,
    #: Dotted paths of more ``Assistant`` classes to register (besides installed apps'
    #: ``assistants`` modules).
    "ZETT_ASSISTANTS": [],
    #: The id of the assistant a new chat talks to when it names none (None: the only
    #: registered one, or the first registered).
    "ZETT_DEFAULT_ASSISTANT": None,
    #: More external event names clients may send (replies to an app's own
    #: ExternalEventExtensions); assistants can declare theirs as ``reply_names``.
    "ZETT_CLIENT_REPLY_NAMES": [],
    #: Seconds a question or approval waits for its answer (0: no deadline).
    "ZETT_REPLY_TIMEOUT": 3600.0,
    #: Seconds a host-page tool (``Assistant.browser_tools``) waits for a page to run it
    #: (0: no deadline).
    "ZETT_BROWSER_TOOL_TIMEOUT": 30.0,
    #: Most messages the ``session`` frame carries (older ones are paged in).
    "ZETT_HISTORY_PAGE": 50,
    #: Frames of an active run kept for replay before its deltas are merged.
    "ZETT_REPLAY_FRAMES": 10_000,
    #: Only signed-in users may chat (pages redirect to LOGIN_URL, sockets are refused).
    "ZETT_REQUIRE_LOGIN": False,
    #: The name zett's pages show: in their titles, the list's heading, the sidebar.
    "ZETT_BRAND": "zett",
    #: Where the pages' "Sign out" button posts (a URL or URL name; None: no button).
    "ZETT_LOGOUT_URL": "logout",
    #: The path of the chat sockets, under the websocket application's root.
    "ZETT_WEBSOCKET_PATH": "ws/sessions/",
    #: Page origins allowed to open a socket (``scheme://host[:port]``); empty: the
    #: socket's own origin on a host of ALLOWED_HOSTS.
    "ZETT_ALLOWED_ORIGINS": [],
    #: Frame budget per person across all their sockets.
    "ZETT_WS_RATE_LIMIT": {"burst": 60, "per_second": 20.0},
    #: Most sockets open at once on one chat, and by one person (per worker process).
    "ZETT_WS_MAX_SOCKETS_PER_SESSION": 20,
    "ZETT_WS_MAX_SOCKETS_PER_PERSON": 50,
    #: Most chats one person may start in an hour.
    "ZETT_MAX_CHATS_PER_HOUR": 60,
    #: Where frame budgets are shared between worker processes ("": in each process).
    "ZETT_LIMITS_REDIS_URL": "",
    #: With a URL, any number of worker processes serve any chat (run leases, fan-out).
    "ZETT_REDIS_URL": None,
    #: Seconds a worker's run lease lasts unrenewed.
    "ZETT_LEASE_SECONDS": 10.0,
    #: On SIGTERM, stop taking runs and let those going finish...
    "ZETT_GRACEFUL_SHUTDOWN": True,
    #: ...for at most this many seconds.
    "ZETT_SHUTDOWN_GRACE": 25.0,
    #: Workers a run may have: a run whose worker died is continued by another until this
    #: many have run it, then it ends ``interrupted``.
    "ZETT_RUN_ATTEMPTS": 3,
    #: Seconds between two sweeps for runs whose worker died and nobody watches (each
    #: worker's background loop, ``agent_app.sessions.background``).
    "ZETT_SWEEP_SECONDS": 5.0,
    #: Updating an API token's ``last_used`` at most this often (seconds).
    "ZETT_TOKEN_TOUCH_SECONDS": 60,
    #: Most bytes a socket may leave unread before it is dropped (close code 4408).
    "ZETT_WS_SEND_BUFFER_BYTES": 1024 * 1024,
    #: The Content-Security-Policy of every page (None: the strict default; "": none).
    "ZETT_CONTENT_SECURITY_POLICY": None,
    #: Seconds an idle AG-UI event stream waits before it sends a keep-alive comment.
    "ZETT_SSE_KEEPALIVE_SECONDS": 15.0,
    #: Seconds the body of a request to zett's HTTP endpoints may send nothing before it
    #: is refused (408; under daphne, ``agent_app.guard.bodies``; 0: no timeout).
    "ZETT_REQUEST_BODY_TIMEOUT": 15.0,
    #: Site-wide MCP servers for every assistant, in the ``mcpServers`` JSON shape (a dict
    #: or its JSON text; ``${VAR}`` from the environment). See docs/mcp.md.
    "ZETT_MCP_SERVERS": {},
    #: Executables a configured stdio MCP server may start (bare names found on PATH, or
    #: absolute paths).
    "ZETT_MCP_ALLOWED_COMMANDS": ["npx", "uvx", "node", "python3", "docker"],
    #: Largest attachment accepted, in bytes.
    "ZETT_ATTACHMENT_MAX_BYTES": 10 * 1024 * 1024,
    #: Media types attachments may have (None: every type zett can read).
    "ZETT_ATTACHMENT_TYPES": None,
    #: Most attachments one person may upload in 24 hours, and their bytes in total.
    "ZETT_ATTACHMENT_DAILY_FILES": 200,
    "ZETT_ATTACHMENT_DAILY_BYTES": 500 * 1024 * 1024,
    #: Most attachments one message may carry.
    "ZETT_ATTACHMENTS_PER_MESSAGE": 10,
    #: OpenTelemetry spans for runs, model calls, tool calls and human waits (read when a
    #: chat's agent is built; needs the ``otel`` extra).
    "ZETT_OTEL": False,
    #: ...with the content: messages, tool arguments and results, error texts.
    "ZETT_OTEL_CONTENT": False,
    #: A bearer token that lets a scraper read ``/metrics`` (staff users may without it).
    "ZETT_METRICS_TOKEN": "",
    #: Input + output tokens per person per day: ``{"user": N, "anonymous": N,
    #: "groups": {"<group>": N}}`` (None: no budgets; ``agent_app.budgets``).
    "ZETT_TOKEN_BUDGETS": None,
    #: How many levels deep assistants may ask their ``delegates`` (1: the chat's
    #: assistant may ask one, which may ask none).
    "ZETT_MAX_DELEGATION_DEPTH": 3,
    #: Webhooks may call private, loopback and link-local addresses (refused otherwise).
    "ZETT_WEBHOOK_ALLOW_PRIVATE": False,
    #: Seconds one webhook delivery attempt may take (connect, send, answer).
    "ZETT_WEBHOOK_TIMEOUT": 10.0,
    #: Seconds before each retry of a failed delivery; after the last, it is given up.
    "ZETT_WEBHOOK_RETRIES": [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800],
    #: Days a delivered or given-up webhook delivery stays in the log (0: forever).
    "ZETT_WEBHOOK_KEEP_DAYS": 30,
    #: When people of the team answer, in the site's own words ("Mon-Fri, 9:00-17:00
    #: CET"): shown to a person who asked for one. None: nothing is promised.
    "ZETT_SUPPORT_HOURS": None,
}


def setting(name: str) -> Any:
    """The value of the zett setting ``name``: the project's, else the default."""
    if name not in DEFAULTS:
        raise AttributeError(f"{name!r} is not a zett setting")
    if name == "ZETT_OPENAI_BASE_URL":
        value = getattr(settings, name, None)
        if value is None:
            value = os.environ.get(name, "").strip() or None
        return value
    return getattr(settings, name, DEFAULTS[name])


def __getattr__(name: str) -> Any:
    if name in DEFAULTS:
        return setting(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
