"""System checks of zett's settings: a bad value fails ``manage.py check`` with a clear message.

Each check is a separate function registered with ``@register`` (tag ``zett``), so checks
of other settings can be added beside them. ``raise_on_invalid_settings`` runs them at ASGI
start-up (``zett_site.asgi``): daphne does not run system checks, and a limit of 0 would
otherwise start fine and turn every handshake into an HTTP 500.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register, run_checks
from django.core.exceptions import ImproperlyConfigured

from agent_app.limits import limit_problems
from agent_app.security import origin_problems

__all__ = [
    "TAG",
    "check_allowed_origins",
    "check_limits",
    "check_login_settings",
    "raise_on_invalid_settings",
]

#: The tag of zett's own checks (``manage.py check --tag zett``).
TAG = "zett"


@register(TAG)
def check_limits(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Frame budget, socket caps and chat quota (``agent_app.limits``)."""
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
        for problem in origin_problems(getattr(settings, "ZETT_ALLOWED_ORIGINS", []))
    ]


@register(TAG)
def check_login_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``ZETT_REQUIRE_LOGIN`` is a boolean and ``LOGIN_URL`` is set when it is on."""
    required = getattr(settings, "ZETT_REQUIRE_LOGIN", False)
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


def raise_on_invalid_settings() -> None:
    """Run zett's checks; ``ImproperlyConfigured`` listing every error found."""
    errors = [message for message in run_checks(tags=[TAG]) if message.is_serious()]
    if errors:
        raise ImproperlyConfigured(
            "Invalid zett settings:\n" + "\n".join(f"  {error.msg}" for error in errors)
        )
