"""``manage.py check`` for the webhook settings (registered by ``agent_app.checks``)."""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, register

from agent_app import conf

__all__ = ["check_webhook_settings"]


@register("zett")
def check_webhook_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """``ZETT_WEBHOOK_TIMEOUT`` > 0 seconds, ``ZETT_WEBHOOK_RETRIES`` a list of seconds
    >= 0, ``ZETT_WEBHOOK_ALLOW_PRIVATE`` a bool."""
    errors = []
    timeout = conf.ZETT_WEBHOOK_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        errors.append(
            Error(f"ZETT_WEBHOOK_TIMEOUT must be seconds > 0, got {timeout!r}", id="zett.E060")
        )
    retries = conf.ZETT_WEBHOOK_RETRIES
    if not isinstance(retries, list | tuple) or not all(
        not isinstance(item, bool) and isinstance(item, int | float) and item >= 0
        for item in retries
    ):
        errors.append(
            Error(
                f"ZETT_WEBHOOK_RETRIES must be a list of seconds >= 0, got {retries!r}",
                hint="For example [5, 30, 120, 600]: the first retry after 5 s, then 30 s …",
                id="zett.E061",
            )
        )
    keep = conf.ZETT_WEBHOOK_KEEP_DAYS
    if isinstance(keep, bool) or not isinstance(keep, int | float) or keep < 0:
        errors.append(
            Error(f"ZETT_WEBHOOK_KEEP_DAYS must be days >= 0, got {keep!r}", id="zett.E063")
        )
    if not isinstance(conf.ZETT_WEBHOOK_ALLOW_PRIVATE, bool):
        errors.append(Error("ZETT_WEBHOOK_ALLOW_PRIVATE must be True or False", id="zett.E062"))
    return errors
