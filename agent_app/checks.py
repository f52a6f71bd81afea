"""Django system checks: a misconfigured deployment says so at start, before anyone chats.

``manage.py check``, ``runserver`` and ``migrate`` run them. Each check is one function.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

__all__ = ["check_model", "check_reply_timeout"]

#: The variable each provider reads its API key from.
_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@register("zett")
def check_model(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    """``ZETT_MODEL`` names a model that can be built; its provider's key is set."""
    from agent_app.agents import resolve_model

    spec = str(getattr(settings, "ZETT_MODEL", "demo") or "demo").strip()
    try:
        resolve_model(spec)
    except ImproperlyConfigured as error:
        return [
            Error(
                str(error),
                hint="Set ZETT_MODEL to 'demo', 'openai:<model>', 'anthropic:<model>' or "
                "'package.module:attribute'.",
                id="zett.E001",
            )
        ]
    except Exception as error:  # a factory of the deployment's own that fails
        return [Error(f"ZETT_MODEL={spec!r} cannot be built: {error}", id="zett.E002")]
    provider = spec.partition(":")[0].strip().lower()
    variable = _KEY_VARIABLES.get(provider)
    if variable and not os.environ.get(variable, "").strip():
        return [
            Warning(
                f"ZETT_MODEL={spec!r} needs an API key, but {variable} is not set: every "
                "message will fail until it is.",
                hint=f"export {variable}=… (any non-empty value for a local OpenAI-compatible "
                "server)",
                id="zett.W001",
            )
        ]
    return []


@register("zett")
def check_reply_timeout(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """``ZETT_REPLY_TIMEOUT`` is a number of seconds (0 = waits never expire)."""
    value = getattr(settings, "ZETT_REPLY_TIMEOUT", 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return [
            Error(
                f"ZETT_REPLY_TIMEOUT must be a number of seconds >= 0, got {value!r}",
                id="zett.E003",
            )
        ]
    return []
