"""System checks of zett's settings: a bad value fails ``manage.py check`` with a clear message.

Each check is a separate function registered with ``@register`` (tag ``zett``, and
``zett_model`` for the model), so checks of other settings can be added beside them.
``raise_on_invalid_settings`` runs the ``zett`` ones at ASGI start-up (``zett_site.asgi``):
daphne does not run system checks, and a limit of 0 would otherwise start fine and turn
every handshake into an HTTP 500.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register, run_checks
from django.core.exceptions import ImproperlyConfigured

from agent_app import conf
from agent_app.budgets.ledger import budget_problems
from agent_app.guard.limits import limit_problems
from agent_app.guard.origins import origin_problems

__all__ = [
    "MODEL_TAG",
    "TAG",
    "check_allowed_origins",
    "check_assistants",
    "check_limits",
    "check_login_settings",
    "check_model",
    "check_reply_timeout",
    "check_setting_types",
    "check_token_budgets",
    "raise_on_invalid_settings",
]

#: The tag of zett's own checks (``manage.py check --tag zett``).
TAG = "zett"
#: The model check builds the model, so it runs with ``manage.py check`` and ``runserver``
#: but not at every ASGI start (a deployment's own model factory may be slow or need the
#: network); a request with a model that cannot be built fails clearly, and is recorded.
MODEL_TAG = "zett_model"


@register(TAG)
def check_limits(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Frame budget, socket caps and chat quota (``agent_app.guard.limits``)."""
    return [
        Error(f"{name} {problem}.", hint="See docs/security.md, 'Limits'.", id="zett.E001")
        for name, problem in limit_problems()
    ]


@register(TAG)
def check_allowed_origins(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``ZETT_ALLOWED_ORIGINS``: full origins, scheme and host (and port) each."""
    return [
        Error(
            f"ZETT_ALLOWED_ORIGINS: {problem}.",
            hint="Give scheme://host[:port] for each page origin allowed to open a socket.",
            id="zett.E002",
        )
        for problem in origin_problems(conf.ZETT_ALLOWED_ORIGINS)
    ]


@register(TAG)
def check_login_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``ZETT_REQUIRE_LOGIN`` is a boolean and ``LOGIN_URL`` is set when it is on."""
    required = conf.ZETT_REQUIRE_LOGIN
    if not isinstance(required, bool):
        return [
            Error(
                f"ZETT_REQUIRE_LOGIN must be True or False, got {required!r}.",
                id="zett.E003",
            )
        ]
    if required and not getattr(settings, "LOGIN_URL", None):
        return [Error("ZETT_REQUIRE_LOGIN is on but LOGIN_URL is empty.", id="zett.E004")]
    return []


#: The variable each provider reads its API key from.
_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@register(MODEL_TAG)
def check_model(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    """``ZETT_MODEL`` names a model that can be built; its provider's key is set."""
    from agent_app.assistants.llm import resolve_model

    spec = str(conf.ZETT_MODEL or "demo").strip()
    try:
        resolve_model(spec)
    except ImproperlyConfigured as error:
        return [
            Error(
                str(error),
                hint="Set ZETT_MODEL to 'demo', 'openai:<model>', 'openai-compatible:<model>' "
                "(with ZETT_OPENAI_BASE_URL), 'anthropic:<model>' or 'package.module:attribute'.",
                id="zett.E010",
            )
        ]
    except Exception as error:  # a factory of the deployment's own that fails
        return [Error(f"ZETT_MODEL={spec!r} cannot be built: {error}", id="zett.E011")]
    provider = spec.partition(":")[0].strip().lower()
    variable = _KEY_VARIABLES.get(provider)
    if variable and not os.environ.get(variable, "").strip():
        return [
            Warning(
                f"ZETT_MODEL={spec!r} needs an API key, but {variable} is not set: every "
                "message will fail until it is.",
                hint=f"export {variable}=… (any non-empty value for a local OpenAI-compatible "
                "server)",
                id="zett.W010",
            )
        ]
    return []


@register(TAG)
def check_reply_timeout(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Durations: ``ZETT_REPLY_TIMEOUT`` >= 0 (0: waits never expire), the lease and the
    shutdown grace > 0 seconds."""
    errors = []
    for name, minimum, strict in (
        ("ZETT_REPLY_TIMEOUT", 0, False),
        ("ZETT_BROWSER_TOOL_TIMEOUT", 0, False),
        ("ZETT_LEASE_SECONDS", 0, True),
        ("ZETT_SHUTDOWN_GRACE", 0, False),
        ("ZETT_SWEEP_SECONDS", 0, True),
    ):
        value = conf.setting(name)
        number = not isinstance(value, bool) and isinstance(value, int | float)
        if not number or not (value > minimum if strict else value >= minimum):
            bound = f"> {minimum}" if strict else f">= {minimum}"
            errors.append(
                Error(f"{name} must be a number of seconds {bound}, got {value!r}", id="zett.E012")
            )
    return errors


@register(TAG)
def check_token_budgets(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """``ZETT_TOKEN_BUDGETS``: tokens per day for users, anonymous visitors and groups."""
    return [
        Error(
            f"ZETT_TOKEN_BUDGETS {problem}.",
            hint='For example {"user": 200000, "anonymous": 20000, "groups": {"staff": None}}.',
            id="zett.E030",
        )
        for problem in budget_problems()
    ]


def raise_on_invalid_settings() -> None:
    """Run zett's checks; ``ImproperlyConfigured`` listing every error found."""
    errors = [message for message in run_checks(tags=[TAG]) if message.is_serious()]
    if errors:
        raise ImproperlyConfigured(
            "Invalid zett settings:\n" + "\n".join(f"  {error.msg}" for error in errors)
        )


@register(TAG)
def check_assistants(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``ZETT_DEFAULT_ASSISTANT`` is registered; each ``approval_required`` tool is one of its
    assistant's tools (a name that is not would silently never be asked about)."""
    from agent_app.assistants import registry

    errors: list[CheckMessage] = []
    default = conf.ZETT_DEFAULT_ASSISTANT
    if default is not None and (not isinstance(default, str) or registry.get(default) is None):
        known = ", ".join(registry.ids()) or "none"
        errors.append(
            Error(
                f"ZETT_DEFAULT_ASSISTANT={default!r} is not a registered assistant "
                f"(registered: {known}).",
                id="zett.E020",
            )
        )
    if not registry.all():
        errors.append(
            Error(
                "No assistant is registered.",
                hint="Declare one in an installed app's assistants.py, or list it in "
                "ZETT_ASSISTANTS.",
                id="zett.E021",
            )
        )
    for assistant in registry.all():
        names = {tool.name for tool in assistant.get_tools()}
        for missing in sorted(set(assistant.approval_required) - names):
            errors.append(
                Error(
                    f"Assistant {assistant.id!r} ({type(assistant).__qualname__}) lists "
                    f"{missing!r} in approval_required but has no tool of that name.",
                    hint=f"Its tools: {', '.join(sorted(names)) or 'none'}.",
                    id="zett.E022",
                )
            )
        errors.extend(_teamwork_problems(assistant, registry.ids()))
    return errors


def _teamwork_problems(assistant: Any, known: list[str]) -> list[CheckMessage]:
    """Each id in ``delegates`` and ``handoffs`` is another registered assistant."""
    errors: list[CheckMessage] = []
    for attribute in ("delegates", "handoffs"):
        ids = getattr(assistant, attribute, ())
        if isinstance(ids, str):
            ids = [ids]
        for other in ids:
            if other == assistant.id or other not in known:
                why = "itself" if other == assistant.id else "no registered assistant"
                errors.append(
                    Error(
                        f"Assistant {assistant.id!r} ({type(assistant).__qualname__}) lists "
                        f"{other!r} in {attribute}, which is {why}.",
                        hint=f"Registered: {', '.join(known)}.",
                        id="zett.E023",
                    )
                )
    return errors


#: Settings whose type and bounds ``check_setting_types`` validates:
#: (name, accepted types, allow None, the smallest value or None).
_TYPED: tuple[tuple[str, tuple[type, ...], bool, float | None], ...] = (
    ("ZETT_DEMO_PACE", (int, float), False, 0),
    ("ZETT_MAX_DELEGATION_DEPTH", (int,), False, 0),
    ("ZETT_HISTORY_PAGE", (int,), False, 1),
    ("ZETT_REPLAY_FRAMES", (int,), False, 1),
    ("ZETT_TOKEN_TOUCH_SECONDS", (int, float), False, 0),
    ("ZETT_REQUEST_BODY_TIMEOUT", (int, float), False, 0),
    ("ZETT_GRACEFUL_SHUTDOWN", (bool,), False, None),
    ("ZETT_MODEL", (str,), False, None),
    ("ZETT_LOGOUT_URL", (str,), True, None),
    ("ZETT_WEBSOCKET_PATH", (str,), False, None),
    ("ZETT_ASSISTANTS", (list, tuple), False, None),
    ("ZETT_CLIENT_REPLY_NAMES", (list, tuple, set, frozenset), False, None),
    ("ZETT_REDIS_URL", (str,), True, None),
    ("ZETT_OPENAI_BASE_URL", (str,), True, None),
    ("ZETT_ATTACHMENT_MAX_BYTES", (int,), False, 1),
    ("ZETT_ATTACHMENT_TYPES", (list, tuple, set, frozenset), True, None),
    ("ZETT_ATTACHMENT_DAILY_FILES", (int,), False, 0),
    ("ZETT_ATTACHMENT_DAILY_BYTES", (int,), False, 0),
    ("ZETT_ATTACHMENTS_PER_MESSAGE", (int,), False, 1),
    ("ZETT_OTEL", (bool,), False, None),
    ("ZETT_OTEL_CONTENT", (bool,), False, None),
    ("ZETT_METRICS_TOKEN", (str,), False, None),
    ("ZETT_RUN_ATTEMPTS", (int,), False, 1),
    ("ZETT_SUPPORT_HOURS", (str,), True, None),
)


@register(TAG)
def check_tracing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``ZETT_OTEL`` on needs the OpenTelemetry API (the ``otel`` extra)."""
    if conf.ZETT_OTEL is not True:
        return []
    import importlib.util

    if importlib.util.find_spec("opentelemetry") is None:
        return [
            Error(
                "ZETT_OTEL is on but opentelemetry-api is not installed.",
                hint='pip install "zett[otel]", or turn ZETT_OTEL off.',
                id="zett.E040",
            )
        ]
    return []


@register(TAG)
def check_setting_types(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every other ``ZETT_*`` setting has the type (and bound) its default has."""
    errors: list[CheckMessage] = []
    for name, kinds, nullable, minimum in _TYPED:
        value = conf.setting(name)
        if value is None and nullable:
            continue
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if wrong_bool or not isinstance(value, kinds):
            wanted = " or ".join(kind.__name__ for kind in kinds) + (" or None" if nullable else "")
            errors.append(Error(f"{name} must be {wanted}, got {value!r}.", id="zett.E013"))
        elif minimum is not None and value < minimum:
            errors.append(Error(f"{name} must be >= {minimum}, got {value!r}.", id="zett.E013"))
    path = conf.ZETT_WEBSOCKET_PATH
    if isinstance(path, str) and (path.startswith("/") or not path.endswith("/")):
        errors.append(
            Error(
                f"ZETT_WEBSOCKET_PATH must be relative and end with '/', got {path!r}.",
                hint="For example 'ws/sessions/'.",
                id="zett.E014",
            )
        )
    url = conf.ZETT_OPENAI_BASE_URL
    if isinstance(url, str) and url and not url.startswith(("http://", "https://")):
        errors.append(
            Error(f"ZETT_OPENAI_BASE_URL must be an http(s) URL, got {url!r}.", id="zett.E015")
        )
    errors += _attachment_type_problems()
    redis_url = conf.ZETT_REDIS_URL
    if (
        isinstance(redis_url, str)
        and redis_url
        and not redis_url.startswith(("redis://", "rediss://", "unix://"))
    ):
        errors.append(
            Error(f"ZETT_REDIS_URL must be a redis:// URL, got {redis_url!r}.", id="zett.E016")
        )
    return errors


@register(TAG)
def check_mcp_servers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``ZETT_MCP_SERVERS`` parses (shape, ``${VAR}``s, allowed commands); no connection
    is made (``manage.py zett_mcp list`` connects)."""
    from django.core.exceptions import ImproperlyConfigured

    from agent_app.agents.mcp import parse_servers

    allowed = conf.ZETT_MCP_ALLOWED_COMMANDS
    if isinstance(allowed, str) or not isinstance(allowed, list | tuple | set | frozenset):
        return [
            Error(
                f"ZETT_MCP_ALLOWED_COMMANDS must be a list of executables, got {allowed!r}.",
                id="zett.E050",
            )
        ]
    try:
        parse_servers(conf.ZETT_MCP_SERVERS, allowed_commands=allowed)
    except ImproperlyConfigured as error:
        return [
            Error(
                str(error),
                hint="See docs/mcp.md; `manage.py zett_mcp list` connects and lists the tools.",
                id="zett.E051",
            )
        ]
    return []


def _attachment_type_problems() -> list[CheckMessage]:
    from agent_app.attachments.sniffing import KNOWN_TYPES

    types = conf.ZETT_ATTACHMENT_TYPES
    if not isinstance(types, list | tuple | set | frozenset):
        return []
    unknown = sorted(str(kind) for kind in types if kind not in KNOWN_TYPES)
    if not unknown:
        return []
    return [
        Error(
            f"ZETT_ATTACHMENT_TYPES holds types zett cannot read: {', '.join(unknown)}.",
            hint=f"Choose among {', '.join(sorted(KNOWN_TYPES))}.",
            id="zett.E017",
        )
    ]


from agent_app.webhooks import checks as _webhook_checks  # noqa: E402, F401  (registers its checks)
