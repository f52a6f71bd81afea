"""System checks for a host project going to production: the channel layer and the headers.

These look at the host's own settings (``CHANNEL_LAYERS``, ``MIDDLEWARE``), which zett does
not set, for the mistakes that only show under load or in a browser:

- ``channels_redis.core.RedisChannelLayer`` reads a process's channels with a blocking
  ``BZPOPMIN`` of ``brpop_timeout`` (5) seconds. redis-py 8 gives every connection a read
  timeout of 5 seconds by default, so that read fails with ``TimeoutError`` before Redis
  answers and every worker closes its sockets with 1011 after a few seconds. The fix is a
  ``socket_timeout`` longer than the pop on each host (an error names it).
- ``ZETT_REDIS_URL`` with a layer that is not shared between processes: runs are leased
  across workers but their frames never reach the other workers' sockets (a warning).
- ``ZETT_CONTENT_SECURITY_POLICY`` set without ``agent_app.guard.headers.SecurityHeadersMiddleware``
  does nothing (a warning).
"""

from __future__ import annotations

import inspect
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from agent_app.checks import TAG

__all__ = ["check_brand", "check_channel_layer", "check_security_headers_middleware"]

CORE_LAYER = "channels_redis.core.RedisChannelLayer"
PUBSUB_LAYER = "channels_redis.pubsub.RedisPubSubChannelLayer"
HEADERS_MIDDLEWARE = "agent_app.guard.headers.SecurityHeadersMiddleware"
#: Either path of the middleware counts: the one host projects named before it moved too.
HEADERS_MIDDLEWARES = frozenset({HEADERS_MIDDLEWARE, "agent_app.headers.SecurityHeadersMiddleware"})
#: What the documentation suggests: well above the core layer's 5 s pop.
SUGGESTED_SOCKET_TIMEOUT = 15
_HINT = "See docs/embedding.md, 'Production'."


@register(TAG)
def check_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    layer = (getattr(settings, "CHANNEL_LAYERS", None) or {}).get("default") or {}
    backend = str(layer.get("BACKEND", ""))
    messages: list[CheckMessage] = []
    if backend == CORE_LAYER:
        messages += _core_layer_timeouts(layer.get("CONFIG") or {})
    if getattr(settings, "ZETT_REDIS_URL", None) and backend not in (CORE_LAYER, PUBSUB_LAYER):
        messages.append(
            Warning(
                f"ZETT_REDIS_URL is set but CHANNEL_LAYERS['default'] is {backend or 'missing'}: "
                "with several worker processes, a run's frames reach only the sockets of the "
                "worker that runs it.",
                hint=f"Use {PUBSUB_LAYER} or {CORE_LAYER} on that Redis. {_HINT}",
                id="zett.W060",
            )
        )
    return messages


def _core_layer_timeouts(config: dict[str, Any]) -> list[CheckMessage]:
    """An error for each host whose read timeout would cut the layer's blocking pop short."""
    try:
        from channels_redis.core import RedisChannelLayer
    except ImportError:  # the layer cannot load at all; Channels says so itself
        return []
    pop = float(getattr(RedisChannelLayer, "brpop_timeout", 5))
    hosts = config.get("hosts") or [{"address": "redis://localhost:6379"}]
    errors: list[CheckMessage] = []
    for index, host in enumerate(hosts if isinstance(hosts, list | tuple) else []):
        timeout = _socket_timeout(host)
        if timeout is not None and timeout <= pop:
            errors.append(
                Error(
                    f"CHANNEL_LAYERS['default']['CONFIG']['hosts'][{index}] reads with a "
                    f"socket_timeout of {timeout:g} s, but {CORE_LAYER} waits up to {pop:g} s "
                    "for a message: every worker fails with redis TimeoutError and closes its "
                    "sockets.",
                    hint=(
                        f'Give the host "socket_timeout": {SUGGESTED_SOCKET_TIMEOUT}, e.g. '
                        f'{{"address": "redis://…", "socket_timeout": '
                        f"{SUGGESTED_SOCKET_TIMEOUT}}}. {_HINT}"
                    ),
                    id="zett.E060",
                )
            )
    return errors


def _socket_timeout(host: Any) -> float | None:
    """The read timeout a layer host's connections get (redis-py's default if none is set)."""
    if isinstance(host, dict) and "socket_timeout" in host:
        value = host["socket_timeout"]
        return None if value is None else float(value)
    address = host.get("address") if isinstance(host, dict) else host
    if isinstance(address, str):
        query = parse_qs(urlsplit(address).query)
        if "socket_timeout" in query:
            try:
                return float(query["socket_timeout"][0])
            except ValueError:
                return None
    return _redis_default_timeout()


def _redis_default_timeout() -> float | None:
    """redis-py's own read timeout (5 s since redis-py 8; none before)."""
    from redis.asyncio.connection import AbstractConnection

    parameter = inspect.signature(AbstractConnection.__init__).parameters.get("socket_timeout")
    default = None if parameter is None else parameter.default
    return None if default in (None, inspect.Parameter.empty) else float(default)


@register(TAG)
def check_brand(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    brand = getattr(settings, "ZETT_BRAND", "zett")
    if isinstance(brand, str) and brand.strip():
        return []
    return [Error(f"ZETT_BRAND must be a non-empty string, got {brand!r}.", id="zett.E061")]


@register(TAG)
def check_security_headers_middleware(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if getattr(settings, "ZETT_CONTENT_SECURITY_POLICY", None) is None:
        return []
    if HEADERS_MIDDLEWARES.intersection(getattr(settings, "MIDDLEWARE", None) or []):
        return []
    return [
        Warning(
            f"ZETT_CONTENT_SECURITY_POLICY is set, but {HEADERS_MIDDLEWARE} is not in "
            "MIDDLEWARE: no page sends it.",
            hint=f"Add {HEADERS_MIDDLEWARE!r} to MIDDLEWARE, after SecurityMiddleware. {_HINT}",
            id="zett.W061",
        )
    ]
