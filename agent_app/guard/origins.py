"""Which WebSocket handshakes may open a chat socket: the ``Origin`` check.

The threat is cross-site WebSocket hijacking: a page on another site opening a socket with
the visitor's cookies. Browsers always send ``Origin`` on a WebSocket handshake, and the
check compares all of it — scheme, host and port — with the origins allowed:

- ``ZETT_ALLOWED_ORIGINS`` set (``https://chat.example.com,http://localhost:8000``): the
  ``Origin`` must be exactly one of those (ports as written, or the scheme's default).
- unset: the page must come from the very origin the socket connects to. The handshake's
  ``Host`` header gives host and port, its scheme (``ws``/``wss``, which daphne takes from
  ``X-Forwarded-Proto`` with ``--proxy-headers``) gives ``http``/``https``, and the host
  must also be one of ``ALLOWED_HOSTS`` (with ``DEBUG`` and an empty ``ALLOWED_HOSTS``,
  the local hosts Django itself admits then: ``localhost``, ``127.0.0.1``, ``[::1]``).
  Browsers always send ``Host``; a handshake without one (a test client) is judged as
  Channels' ``AllowedHostsOriginValidator`` judges every handshake: the origin's host must
  be one of ``ALLOWED_HOSTS``, whatever its scheme and port.

``Origin: null`` (sandboxed frames, ``file:`` pages) is refused. A handshake with no
``Origin`` at all does not come from a browser (a CLI, a script, a test's
``WebsocketCommunicator``): it carries no ambient browser credentials to abuse, and could
send any ``Origin`` it liked anyway, so it is let through; the access rules of
``agent_app.guard.access`` still apply to it. A refused handshake is logged (this module,
warning) with the reason, so a misconfigured deployment says why its pages cannot connect.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from agent_app import conf

__all__ = [
    "Origin",
    "OriginValidator",
    "allowed_hosts",
    "allowed_origin",
    "origin_problems",
    "origin_refusal",
    "parse_origin",
]

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SOCKET_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}

#: ``(scheme, host, port)``, lower-case, with the default port filled in.
Origin = tuple[str, str, int]


def parse_origin(text: str) -> Origin | None:
    """``scheme://host[:port]`` as an ``Origin``; None if it is not one (paths refused)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def origin_problems(values: Any) -> list[str]:
    """What is wrong with a ``ZETT_ALLOWED_ORIGINS`` value (empty when it is fine)."""
    if not isinstance(values, list | tuple):
        return [f"must be a list of origins, got {values!r}"]
    return [
        f"{value!r} is not an origin like 'https://chat.example.com' or 'http://localhost:8000'"
        for value in values
        if not isinstance(value, str) or parse_origin(value) is None
    ]


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def allowed_hosts() -> list[str]:
    """``ALLOWED_HOSTS`` as Django applies it: empty with ``DEBUG`` means the local hosts."""
    hosts = list(settings.ALLOWED_HOSTS)
    if not hosts and settings.DEBUG:
        return [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def origin_refusal(scope: dict[str, Any]) -> str | None:
    """Why the handshake in ``scope`` may not proceed; None when it may (see the module
    docstring)."""
    raw = _header(scope, b"origin")
    if raw is None:
        return None
    origin = parse_origin(raw)
    if origin is None:
        return f"Origin {raw!r} is not a scheme://host[:port] origin"
    explicit = [parse_origin(value) for value in conf.ZETT_ALLOWED_ORIGINS]
    if explicit:
        if origin in explicit:
            return None
        return f"Origin {raw!r} is not one of ZETT_ALLOWED_ORIGINS"
    hosts = allowed_hosts()
    host = _header(scope, b"host")
    if host is None:  # not a browser: nothing to compare scheme and port with
        if validate_host(_bracket(origin[1]), hosts):
            return None
        return f"Origin {raw!r}: its host is not in ALLOWED_HOSTS"
    scheme = _SOCKET_SCHEMES.get(str(scope.get("scheme") or "ws").lower())
    if scheme is None or origin[0] != scheme:
        return f"Origin {raw!r} does not match the socket's scheme ({scope.get('scheme')})"
    domain, port = split_domain_port(host)
    if not domain or not validate_host(domain, hosts):
        return f"Host {host!r} is not in ALLOWED_HOSTS"
    host_port = int(port) if port else _DEFAULT_PORTS[scheme]
    if _bracket(origin[1]) == domain and origin[2] == host_port:
        return None
    return (
        f"Origin {raw!r} is another origin than the socket's ({host}); "
        "list the page's origin in ZETT_ALLOWED_ORIGINS to allow it"
    )


def allowed_origin(scope: dict[str, Any]) -> bool:
    """Whether the handshake in ``scope`` may proceed."""
    return origin_refusal(scope) is None


def _bracket(host: str) -> str:
    """An IPv6 address as ``ALLOWED_HOSTS`` and ``Host`` write it: ``[::1]``."""
    return f"[{host}]" if ":" in host else host


class OriginValidator:
    """ASGI middleware: refuses a WebSocket handshake whose ``Origin`` is not allowed."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        refusal = origin_refusal(scope) if scope["type"] == "websocket" else None
        if refusal is not None:
            logger.warning("Refused a websocket handshake on %s: %s", scope.get("path"), refusal)
            message = await receive()  # websocket.connect
            if message["type"] == "websocket.connect":
                await send({"type": "websocket.close", "code": 403})
            return None
        return await self.application(scope, receive, send)
