"""Request bodies refused before they are read: too large by their ``Content-Length``, or
stalled.

Under daphne an application sees a request only once its whole body has arrived: Twisted's
HTTP parser keeps the body (in a temporary file past 100 kB) until its last byte, then
daphne puts all of it, chunk by chunk, into the application's queue at once, so memory
holds the whole body before Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` check or a view can
look at it. A client that declares 2 GB and sends 64 KiB is never answered at all. So the
refusal has to happen in the server, when the headers are in: ``guard`` makes daphne's
request class a subclass that asks ``limit_for`` about each request as soon as its
headers are read, and

- answers ``413`` (JSON ``too_large``, ``Connection: close``) at once when the declared
  ``Content-Length`` is over the view's limit, or when a chunked body grows past it, then
  reads and discards what the client still sends for at most ``LINGER_SECONDS`` (so that
  the client reads the answer instead of a reset connection);
- answers ``408`` (``timeout``) when the body of such a request stalls: no byte for
  ``ZETT_REQUEST_BODY_TIMEOUT`` seconds.

Which views have a limit: a view that says so (``body_limit``: the attachment upload, the
AG-UI run), and every other view of the HTTP API (``agent_app.api``), whose bodies are
JSON: ``api_body_limit``. Other views (the host's own) are left to the server and Django.
Under other ASGI servers there is nothing to hook into: put a proxy with a body limit in
front (docs/deploy.md); Django's own checks still refuse, after reading.

Installed from ``AppConfig.ready`` when daphne's server module is loaded (as
``agent_app.sessions.daphne_exit``): daphne builds each connection's requests from its
module's ``WebRequest`` at that moment, so the subclass replaces that name.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote

from django.conf import settings
from django.urls import Resolver404, URLResolver, get_resolver, get_urlconf

from agent_app import conf

__all__ = ["LINGER_SECONDS", "BodyGuard", "api_body_limit", "body_limit", "guard", "limit_for"]

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

#: Largest JSON body the HTTP API reads, whatever ``DATA_UPLOAD_MAX_MEMORY_SIZE`` allows.
API_MAX_BODY_BYTES = 4 * 1024 * 1024
#: Seconds a refused connection is still read (and discarded) so the client reads the answer.
LINGER_SECONDS = 5.0
_ATTRIBUTE = "zett_max_body"


def body_limit(limit: Callable[[], int | None]) -> Callable[[F], F]:
    """Decorate a view: its request bodies may hold at most ``limit()`` bytes (None: any)."""

    def mark(view: F) -> F:
        setattr(view, _ATTRIBUTE, limit)
        return view

    return mark


def api_body_limit() -> int:
    """The largest body the HTTP API takes: ``API_MAX_BODY_BYTES``, or Django's
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` when that is lower."""
    django_limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if django_limit is None:
        return API_MAX_BODY_BYTES
    return min(API_MAX_BODY_BYTES, int(django_limit))


def limit_for(path: str) -> int | None:
    """The most bytes a body sent to ``path`` may hold (None: not zett's to say)."""
    view = _view_at(get_resolver(get_urlconf()), path)
    if view is None:
        return None
    limit = getattr(view, _ATTRIBUTE, None)
    if limit is not None:
        return limit()
    if getattr(view, "__module__", "").startswith("agent_app.api."):
        return api_body_limit()
    return None


@functools.lru_cache(maxsize=512)
def _view_at(resolver: URLResolver, path: str) -> Callable[..., Any] | None:
    """The view ``resolver`` sends ``path`` to (None: none), kept per URLconf and path:
    every request with a body asks before Django resolves it again (about 0.1 ms a
    ``POST`` of the site's URLs), and a changed URLconf is another resolver."""
    try:
        return resolver.resolve(path).func
    except (Resolver404, ValueError):
        return None


def body_timeout() -> float:
    """``ZETT_REQUEST_BODY_TIMEOUT``: seconds a body may send nothing (0: no timeout)."""
    return float(conf.ZETT_REQUEST_BODY_TIMEOUT or 0)


def guard() -> None:
    """Give daphne (if this process loaded it) the request class that refuses early."""
    module = sys.modules.get("daphne.http_protocol")
    if module is None or "daphne.server" not in sys.modules:
        return
    if getattr(module.WebRequest, "zett_guarded", False):
        return
    module.WebRequest = _guarded(module.WebRequest)


def _guarded(base: type) -> type:
    """daphne's request class with ``BodyGuard`` in front of it."""
    return type("GuardedRequest", (BodyGuard, base), {})


class BodyGuard:
    """The methods of Twisted's ``Request`` that see a body arrive, refusing a too large
    or stalled one before it is read (a mixin in front of daphne's ``WebRequest``).

    It also turns off Twisted's parsing of a POST's form arguments: daphne hands the
    application the raw body and never reads them, and Twisted parsed every POST's
    ``Content-Type`` through the ``email`` package (about 0.2 ms of an AG-UI POST's CPU)
    and a form's whole body for nothing; a malformed form is Django's to answer.
    """

    zett_guarded = True
    _limit: int | None = None
    _received = 0
    _stall: Any = None
    _refused = False
    channel: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False  # Twisted's ``Request`` sets it True

    def gotLength(self, length: int | None) -> None:
        """The headers are in: ``length`` is the declared body size (None: chunked)."""
        if length == 0:  # no body (most requests): nothing to guard, no URL to resolve
            super().gotLength(length)  # type: ignore[misc]
            return
        raw = getattr(self.channel, "_path", b"") or b""
        self._limit = _limit_of_target(raw)
        if self._limit is not None and length is not None and length > self._limit:
            self._refuse(413, "too_large", _too_large(self._limit))
            return
        super().gotLength(length)  # type: ignore[misc]
        if self._limit is not None:
            self._arm()

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._limit is not None and self._received > self._limit:
            self._refuse(413, "too_large", _too_large(self._limit))
            return
        super().handleContentChunk(data)  # type: ignore[misc]
        self._arm()

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        self._disarm()
        super().requestReceived(command, path, version)  # type: ignore[misc]

    def connectionLost(self, reason: Any) -> None:
        self._disarm()
        super().connectionLost(reason)  # type: ignore[misc]

    def _arm(self) -> None:
        from twisted.internet import reactor

        seconds = body_timeout()
        if seconds <= 0:
            return
        if self._stall is not None and self._stall.active():
            self._stall.reset(seconds)
        else:
            self._stall = reactor.callLater(seconds, self._stalled)

    def _disarm(self) -> None:
        stall, self._stall = self._stall, None
        if stall is not None and stall.active():
            stall.cancel()

    def _stalled(self) -> None:
        self._stall = None
        message = f"The request body sent nothing for {body_timeout():g} s"
        self._refuse(408, "timeout", message)

    def _refuse(self, status: int, code: str, message: str) -> None:
        self._refused = True
        self._disarm()
        _answer_and_drop(self, status, code, message)


def _limit_of_target(raw: bytes) -> int | None:
    """``limit_for`` the request target of an HTTP request line (path and query)."""
    try:
        path = unquote(raw.split(b"?", 1)[0].decode("ascii"))
    except UnicodeDecodeError:
        return None
    if not path.startswith("/"):
        return None
    try:
        return limit_for(path)
    except Exception:  # a host's URLconf that fails to resolve: not ours to refuse
        logger.warning("Could not resolve %r for its body limit", path[:120], exc_info=True)
        return None


def _too_large(limit: int) -> str:
    return f"The request body is over {limit} bytes"


_REASONS = {408: b"Request Timeout", 413: b"Content Too Large"}


def _answer_and_drop(request: Any, status: int, code: str, message: str) -> None:
    """Answer on the raw connection (the request was never handed to the application),
    stop parsing it, and read and discard what still comes for ``LINGER_SECONDS``."""
    from twisted.internet import reactor

    channel = request.channel
    transport = getattr(channel, "transport", None)
    if transport is None:
        return
    body = json.dumps({"code": code, "message": message}).encode()
    head = (
        b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n" % (status, _REASONS[status], len(body))
    )
    logger.info("Refused a request body (%d %s): %s", status, code, message)
    request.requestHeaders.removeHeader(b"expect")  # no "100 Continue" after the answer

    def discard(data: bytes) -> None:
        return None

    channel.dataReceived = channel.rawDataReceived = channel.lineReceived = discard
    transport.write(head + body)
    if hasattr(transport, "loseWriteConnection"):
        transport.loseWriteConnection()
    reactor.callLater(LINGER_SECONDS, _abort, transport)


def _abort(transport: Any) -> None:
    if getattr(transport, "connected", False):
        transport.abortConnection()
