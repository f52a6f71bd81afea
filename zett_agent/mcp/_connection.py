"""One connection to one MCP server, owned by one long-lived task.

The ownership story. The ``mcp`` package builds a connection out of anyio task groups and
cancel scopes; entering such a context in one task and leaving it in another corrupts
them ("cancel scope in a different task"). So every ``Connection`` has exactly one *owner
task* (``_own``) that opens the ``mcp.Client``, holds it, and closes it; nobody else ever
enters or exits it. Callers only *use* the open client: ``call_tool`` and ``list_tools``
write requests into its streams from a short task of their own (one per call: the runtime
steps a request by hand in its consumer's task, and the client's own anyio scopes, such as
its read timeout, need a task to themselves) and await the answer there, so a caller that
is cancelled cancels only its own request.

How the owner lives:

1. It connects (``Client.__aenter__``; on a 2026-07-28 connection it also opens a
   ``subscriptions/listen`` stream so the server can announce tool-list changes) and wakes
   everyone waiting in ``_connected``.
2. It then sleeps on ``_poke`` until one of: ``aclose`` asked it to stop; a caller reported
   the session lost (``_report_lost``); the connection stayed idle (no call in flight) for
   ``idle_timeout`` seconds; the transport itself failed (the anyio scope inside the client
   cancels the owner, and leaving the ``async with`` raises the cause).
3. Lost: it records the cause, waits a backoff (``backoff * 2**n``, at most
   ``max_backoff``; the wait ends early on ``aclose``) and connects again. Idle or closed:
   it leaves the client and ends; the ``MCPServer`` forgets it, and the next call opens a
   fresh one. Refused (the HTTP server answered 401 or 403 while connecting: these
   credentials are not accepted): it ends at once, and the callers waiting for it fail
   with that reason instead of waiting ``connect_timeout`` for a connection that cannot
   come; the next call tries again once.

Retries. A call is sent at most twice, and the second time only when the first provably
never reached the server: the HTTP session was unknown to the server ("Session not
found": a restarted server refused it before running anything), the request could
not be written at all, or the connection died of a connect failure (nothing was listening).
A call lost after it was sent is never repeated: it fails with ``MCPCallLost`` (it may or
may not have run on the server).

Every wait here (for a connection, for a backoff, for an answer) is an ordinary await on
the waiting task, so cancelling that task ends it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from zett_agent.mcp._tracing import traced_under, untraced
from zett_agent.mcp.errors import MCPCallLost, MCPConnectionError

__all__ = ["Connection", "current_call"]

logger = logging.getLogger("zett_agent.mcp")

#: The call this task is making, so an elicitation asked during it finds its tool call.
current_call: ContextVar[Any] = ContextVar("zett_mcp_current_call", default=None)
#: Set by an owner task for each session it opens: the HTTP statuses that refused its
#: credentials (the HTTP transport appends to it; see ``note_refusal``).
_refusals: ContextVar[list[int] | None] = ContextVar("zett_mcp_refusals", default=None)
#: Set by an owner task for each session it opens: what to call when its transport ends
#: on its own (a stdio child exited: see ``note_transport_ended``).
_transport_ended: ContextVar[Callable[[], None] | None] = ContextVar(
    "zett_mcp_transport_ended", default=None
)


def note_refusal(status: int) -> None:
    """Record that the server refused this connection's credentials (HTTP 401 or 403)."""
    refusals = _refusals.get()
    if refusals is not None:
        refusals.append(status)


def note_transport_ended() -> None:
    """The transport's read side ended (a stdio child exited or closed its stdout): the
    session is lost now, not at its next request."""
    ended = _transport_ended.get()
    if ended is not None:
        ended()


T = TypeVar("T")

_UNKNOWN_SESSION = frozenset({"Session not found", "Session terminated"})


def _in_own_task(coroutine: Coroutine[Any, Any, T]) -> Awaitable[T]:
    """Run ``coroutine`` in a real task and return it to await.

    The runtime steps a request by hand inside its consumer's task; the ``mcp`` client's
    anyio cancel scopes (its read timeout, its task groups) need to own the task they run
    in. Awaiting the task keeps the caller's cancellation: cancelling the caller cancels
    the task and waits until it has ended, as awaiting any task does.
    """
    return asyncio.get_running_loop().create_task(coroutine)


def _never_reached(error: BaseException) -> bool:
    """Whether ``error`` proves the server never ran the request (safe to send again)."""
    if isinstance(error, anyio.ClosedResourceError | anyio.BrokenResourceError):
        return True
    if isinstance(error, MCPError):
        # A (restarted) HTTP server that does not know the session refuses the request
        # before running anything: "Session not found" in its body, or a bare 404.
        return error.error.message in _UNKNOWN_SESSION
    return False


def _is_connect_failure(error: BaseException | None) -> bool:
    """Whether the connection died because nothing answered a connection attempt."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, httpx2.ConnectError | ConnectionRefusedError):
            return True
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend((current.__cause__, current.__context__))
    return False


def _root_cause(error: BaseException | None) -> str:
    """The innermost error of an exception group chain, as ``Type: message``."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if error is None:
        return "unknown cause"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class Connection:
    """One ``mcp.Client`` to one server for one connection key, opened by its owner task."""

    def __init__(
        self,
        *,
        server_name: str,
        make_transport: Callable[[], Any],
        mode: str,
        connect_timeout: float,
        call_timeout: float | None,
        idle_timeout: float | None,
        backoff: float,
        max_backoff: float,
        on_tools_changed: Callable[[], None],
        elicitation_callback: Callable[..., Awaitable[Any]],
        on_end: Callable[[Connection], None],
        trace_context: Any = None,
    ) -> None:
        self.server_name = server_name
        self._make_transport = make_transport
        self._mode = mode
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._idle_timeout = idle_timeout
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._on_tools_changed = on_tools_changed
        self._elicitation_callback = elicitation_callback
        self._on_end = on_end
        #: The trace context of whoever opened the connection: its first handshake's parent.
        self._trace_context = trace_context
        self._client: Client | None = None
        #: Bumped by each new session; a caller reports loss only of the one it used.
        self._generation = 0
        #: The current session's end (resolved with the cause that ended it).
        self._ended_generation: dict[int, asyncio.Future[BaseException | None]] = {}
        self._last_error: BaseException | None = None
        self._closing = False
        self._lost_generation: int | None = None
        self._in_flight = 0
        self._last_used = 0.0
        self._calls: list[Any] = []
        self.loop = asyncio.get_running_loop()
        self._poke = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._waiters = 0
        self._failures = 0
        #: Connection attempts that failed so far (a waiter fails at once on a new one that
        #: found nothing listening).
        self._failed_attempts = 0
        self._connecting = False
        self.closed = False
        #: Why the server refused this connection's credentials, once it has.
        self._refused: MCPConnectionError | None = None

    # -- owner -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._own(), name=f"zett-mcp-{self.server_name}"
        )

    async def _own(self) -> None:
        try:
            while not self._closing:
                generation = self._generation + 1
                ended = asyncio.get_running_loop().create_future()
                self._ended_generation = {generation: ended}
                cause: BaseException | None = None
                try:
                    await self._session(generation)
                except Exception as error:  # the transport failed or the session was lost
                    cause = error
                finally:
                    self._client = None
                    self._wake_waiters()
                    if not ended.done():
                        ended.set_result(cause)
                if cause is None:
                    return  # idle or closed
                if self._refused is not None:
                    self._last_error = self._refused
                    return  # the same credentials would be refused again
                self._last_error = cause
                if self._generation < generation:  # it never connected
                    self._failed_attempts += 1
                self._failures += 1
                logger.info("MCP server %r: connection lost (%r)", self.server_name, cause)
                await self._sleep(min(self._max_backoff, self._backoff * 2 ** (self._failures - 1)))
                if self._failures > 1 and self._in_flight == 0 and self._waiters == 0:
                    return  # nobody needs it: the next call opens a fresh connection
        finally:
            self.closed = True
            self._client = None
            for ended in self._ended_generation.values():
                if not ended.done():
                    ended.set_result(self._last_error)
            self._wake_waiters()
            self._on_end(self)

    async def _session(self, generation: int) -> None:
        """Open, hold and close one session (all in this, the owner, task)."""
        self._connecting = True
        refusals: list[int] = []
        _refusals.set(refusals)
        _transport_ended.set(lambda: self._report_lost(generation))
        client = Client(
            self._make_transport(),
            mode=self._mode,
            cache=None,
            read_timeout_seconds=self._call_timeout,
            elicitation_callback=lambda ctx, params: self._elicitation_callback(self, ctx, params),
            message_handler=self._on_message,
            logging_callback=self._on_log,
            log_level="info",
        )
        connected = False
        opener, self._trace_context = self._trace_context, None  # the first attempt's only
        try:
            async with contextlib.AsyncExitStack() as stack:
                with traced_under(opener):
                    await stack.enter_async_context(client)
                connected = True
                tools = client.server_capabilities.tools
                if (
                    client.protocol_version in MODERN_PROTOCOL_VERSIONS
                    and tools is not None
                    and tools.list_changed
                ):
                    with untraced():
                        await stack.enter_async_context(client.listen(tools_list_changed=True))
                self._connecting = False
                self._generation = generation
                self._failures = 0
                self._last_error = None
                self._client = client
                if generation > 1:
                    self._on_tools_changed()  # a restarted server may list other tools
                self._wake_waiters()
                await self._hold(generation)
        except Exception:
            if refusals and not connected:
                self._refused = MCPConnectionError(
                    f"MCP server {self.server_name!r} refused the connection's credentials "
                    f"(HTTP {refusals[0]})"
                )
            raise
        finally:
            self._connecting = False
            self._client = None

    async def _hold(self, generation: int) -> None:
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        while True:
            if self._closing:
                return
            if self._lost_generation == generation:
                raise MCPConnectionError(f"MCP server {self.server_name!r}: the session was lost")
            idle_since = max(idle_since, self._last_used)
            if self._in_flight:
                idle_since = loop.time()
            elif self._idle_timeout is not None and loop.time() - idle_since >= self._idle_timeout:
                return
            timer = None
            if not self._in_flight and self._idle_timeout is not None:
                timer = loop.call_at(idle_since + self._idle_timeout, self._poke.set)
            try:
                await self._poke.wait()
            finally:
                self._poke.clear()
                if timer is not None:
                    timer.cancel()

    async def _sleep(self, seconds: float) -> None:
        timer = asyncio.get_running_loop().call_later(seconds, self._poke.set)
        try:
            while not self._closing and not self._poke.is_set():
                await self._poke.wait()
        finally:
            self._poke.clear()
            timer.cancel()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._on_tools_changed()
        await anyio.lowlevel.checkpoint()

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A server's log line: the person sees it on the one call in flight, if there
        is one (a line cannot be tied to one of several calls)."""
        logger.debug("MCP server %r logs (%s): %r", self.server_name, params.level, params.data)
        call = self.only_call
        progress = getattr(call, "progress", None)
        if progress is not None:
            progress.log(str(params.level), params.data)

    def _wake_waiters(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- callers -----------------------------------------------------------------------

    async def _connected(self) -> tuple[Client, int]:
        """The open client and its generation; wait (at most ``connect_timeout``) for one.

        A connection attempt made while we wait that finds nothing listening (connection
        refused: the server is down) fails the wait at once: waiting out
        ``connect_timeout`` would only stall the run."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout
        attempts = self._failed_attempts
        self._waiters += 1
        try:
            while True:
                if self._client is not None and self._lost_generation != self._generation:
                    return self._client, self._generation
                if self._refused is not None:
                    raise MCPConnectionError(str(self._refused))
                if self._failed_attempts > attempts and _is_connect_failure(self._last_error):
                    raise MCPConnectionError(
                        f"MCP server {self.server_name!r} is unreachable (nothing accepted "
                        f"the connection): {_root_cause(self._last_error)}"
                    )
                if self.closed or self._closing:
                    raise MCPConnectionError(f"MCP server {self.server_name!r}: connection closed")
                remaining = deadline - loop.time()
                if remaining <= 0:
                    cause = f": {self._last_error!r}" if self._last_error is not None else ""
                    raise MCPConnectionError(
                        f"MCP server {self.server_name!r} is unreachable "
                        f"(no connection within {self._connect_timeout:g} s){cause}"
                    )
                changed = self._changed
                timer = loop.call_later(remaining, changed.set)
                try:
                    await changed.wait()
                finally:
                    timer.cancel()
        finally:
            self._waiters -= 1

    def _report_lost(self, generation: int) -> None:
        if self._generation == generation and self._client is not None:
            self._lost_generation = generation
            self._poke.set()

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server lists (all pages), fetched in a task of its own."""
        return await _in_own_task(self._list_tools())

    async def call_tool(
        self, name: str, arguments: dict[str, Any], call: Any
    ) -> types.CallToolResult:
        """Call ``name`` once (twice only when the first never reached the server), in a
        task of its own."""
        return await _in_own_task(self._call_tool(name, arguments, call))

    async def _list_tools(self) -> list[types.Tool]:
        for attempt in (1, 2):
            client, generation = await self._connected()
            self._begin(None)
            try:
                tools: list[types.Tool] = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        return tools
            except Exception as error:
                if attempt == 1 and await self._lost_before_sent(error, generation):
                    continue
                raise
            finally:
                self._end(None)
        raise AssertionError("unreachable")

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], call: Any
    ) -> types.CallToolResult:
        for attempt in (1, 2):
            client, generation = await self._connected()
            self._begin(call)
            token = current_call.set(call)
            progress = getattr(call, "progress", None)
            try:
                return await client.call_tool(
                    name,
                    arguments,
                    progress_callback=progress.progress if progress is not None else None,
                )
            except Exception as error:
                if attempt == 1 and await self._lost_before_sent(error, generation):
                    continue
                if isinstance(error, MCPError) and error.code == types.CONNECTION_CLOSED:
                    self._report_lost(generation)
                    raise MCPCallLost(
                        f"The connection to MCP server {self.server_name!r} was lost during the "
                        f"call of {name!r}; it may or may not have run, so it was not repeated"
                    ) from error
                raise
            finally:
                current_call.reset(token)
                self._end(call)
        raise AssertionError("unreachable")

    async def _lost_before_sent(self, error: BaseException, generation: int) -> bool:
        """Report a lost session; True when ``error`` proves the request never arrived."""
        if _never_reached(error):
            self._report_lost(generation)
            return True
        if isinstance(error, MCPError) and error.code == types.CONNECTION_CLOSED:
            self._report_lost(generation)
            ended = self._ended_generation.get(generation)
            if ended is not None:
                # The owner records why the session died; wait for it (briefly).
                await asyncio.wait([ended], timeout=self._connect_timeout)
                return ended.done() and _is_connect_failure(ended.result())
        return False

    def _begin(self, call: Any) -> None:
        self._in_flight += 1
        if call is not None:
            self._calls.append(call)

    def _end(self, call: Any) -> None:
        self._in_flight -= 1
        self._last_used = self.loop.time()
        if call is not None:
            self._calls.remove(call)
        if self._in_flight == 0:
            self._poke.set()  # the idle clock starts now

    @property
    def only_call(self) -> Any:
        """The one call in flight, or None when there are none or several."""
        return self._calls[0] if len(self._calls) == 1 else None

    # -- shutdown ------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Ask the owner to close the session and wait until it has."""
        self._closing = True
        self._poke.set()
        task = self._task
        if task is not None and self._connecting:
            task.cancel()  # a connection attempt does not watch _poke; end it here
        if task is not None and not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.done():
                    raise
            except Exception:
                pass
