"""``MCPServer``: one MCP server's tools as zett tools, for many people at once.

Use it as an extension (``Agent(..., extensions=[server])``: ``on_tool`` registers the
server's tools for every request, and the server answers elicitations through external
waits) or hand its tools out (``tools=await server.tools()``). ``async with server:`` or
``await server.aclose()`` closes every connection it opened.

Connections. Each connection belongs to one *connection key*: the headers it sends. A
``headers`` callable is asked, per request, for the headers of that request's person
(``headers(context)``, sync or async; ``context`` is None outside a run); two different
header sets never share a connection, equal ones do (so a server that needs no
credentials has one connection) unless ``person_key`` names the person of each request:
then every person has connections of their own. Each connection is opened and closed by its own task
(``zett_agent.mcp._connection`` tells that story), reconnects with backoff, and closes
after ``idle_timeout`` seconds without a call. A stdio server has one connection.

Tool lists are cached per connection key and refreshed after the server announces a
change (``notifications/tools/list_changed``). ``include`` / ``exclude`` filter them and
``no_approval`` exempts tools from approval; all three accept a tool's own name or its
zett name ``<server>__<tool>``.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import json
import logging
import re
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from zett_agent.mcp._connection import Connection, note_refusal, note_transport_ended
from zett_agent.mcp._tracing import current_context
from zett_agent.mcp.approval import ApprovalNames, MCPToolInfo, annotations_need_approval
from zett_agent.mcp.elicitation import ElicitationCallback, ElicitationWaits
from zett_agent.mcp.errors import MCPConnectionError, MCPToolArgumentsError
from zett_agent.mcp.progress import CallProgress
from zett_agent.mcp.results import ArgumentValidator, to_tool_result
from zett_agent.tools.base import AgentTool, ToolResult, _current_run_context, current_tool_call_id

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext

__all__ = ["HeadersSource", "MCPServer", "MCPTool"]

logger = logging.getLogger("zett_agent.mcp")

HeadersSource = (
    Mapping[str, str]
    | Callable[["AgentRunContext | None"], "Mapping[str, str] | None"]
    | Callable[["AgentRunContext | None"], "Awaitable[Mapping[str, str] | None]"]
    | None
)

_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(slots=True)
class _Call:
    context: AgentRunContext | None
    tool_call_id: str | None
    zett_name: str
    #: Where the call is, for the person (None outside a run).
    progress: CallProgress | None = None


class _Handler:
    """The handler of one MCP tool: pick the connection for the run, call, map the result."""

    __slots__ = ("mcp_name", "server", "validator", "zett_name")

    def __init__(self, server: MCPServer, mcp_name: str, zett_name: str, schema: dict) -> None:
        self.server = server
        self.mcp_name = mcp_name
        self.zett_name = zett_name
        self.validator = ArgumentValidator(zett_name, schema)

    async def __call__(self, **arguments: Any) -> ToolResult:
        server = self.server
        context = _current_run_context.get()
        connection = await server._connection_for(context)
        tool_call_id = current_tool_call_id()
        progress = None
        if context is not None and tool_call_id is not None:
            progress = CallProgress(context, tool_call_id, self.zett_name, server.name)
        call = _Call(context, tool_call_id, self.zett_name, progress)
        try:
            if progress is None:
                result = await connection.call_tool(self.mcp_name, arguments, call)
            else:
                async with progress.relaying():
                    result = await connection.call_tool(self.mcp_name, arguments, call)
        except BaseExceptionGroup as group:
            raise _single(group) from None
        return to_tool_result(
            result, max_chars=server.max_result_chars, max_image_bytes=server.max_image_bytes
        )


@dataclass(slots=True)
class MCPTool(AgentTool):
    """An ``AgentTool`` of an MCP server: its arguments are checked against the server's
    JSON Schema by ``validate_arguments``, so whoever asks first (the call itself, or an
    approval gate before it) sees invalid arguments refused without calling the server."""

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise MCPToolArgumentsError(
                f"Arguments must be a JSON object, got {type(arguments).__name__}"
            )
        self.handler.validator.check(arguments)
        return arguments


def _single(group: BaseExceptionGroup) -> BaseException:
    """The one error inside (nested) single-error groups anyio wraps errors in."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _check_seconds(name: str, value: float | None, *, allow_none: bool) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)


class MCPServer(ElicitationWaits):
    """An MCP server over streamable HTTP (``url=``) or stdio (``command=``).

    ``headers``: a mapping, or a callable ``(context) -> mapping`` (sync or async) giving
    the headers of one person's connection; ``person_key``: a callable ``(context) -> str``
    naming the request's person, so that people never share a connection even when their
    headers are equal. ``mode``: how the protocol version is
    negotiated (``"auto"``, ``"legacy"`` or a version string; the ``mcp`` package's
    ``Client(mode=...)``). Timeouts are in seconds: ``connect_timeout`` bounds how long a
    call waits for a connection, ``call_timeout`` each request to the server (None: no
    limit), ``idle_timeout`` how long an unused connection stays open (None: until
    ``aclose``).
    """

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        headers: HeadersSource = None,
        person_key: Callable[[AgentRunContext | None], str | None] | None = None,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        include: Collection[str] | None = None,
        exclude: Collection[str] = (),
        no_approval: Collection[str] = (),
        elicitation: ElicitationCallback | None = None,
        elicitation_timeout: float | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = 300.0,
        idle_timeout: float | None = 300.0,
        backoff: float = 0.25,
        max_backoff: float = 30.0,
        max_result_chars: int = 100_000,
        max_image_bytes: int = 5_000_000,
        mode: str = "auto",
        required: bool = False,
    ) -> None:
        super().__init__(elicitation_timeout=elicitation_timeout)
        if not isinstance(name, str) or not _NAME.fullmatch(name) or "__" in name:
            raise ValueError(
                "An MCP server name must be 1-40 letters, digits, '_' or '-' without '__', "
                f"got {name!r}"
            )
        if (url is None) == (command is None):
            raise ValueError(f"MCP server {name!r} needs exactly one of url= or command=")
        if url is not None:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"MCP server {name!r}: url must be http(s)://..., got {url!r}")
            if env is not None or cwd is not None:
                raise ValueError(f"MCP server {name!r}: env= and cwd= are for stdio servers")
        else:
            if (
                isinstance(command, str)
                or not command
                or not all(isinstance(part, str) and part for part in command)
            ):
                raise ValueError(
                    f"MCP server {name!r}: command must be a non-empty list of strings, "
                    f"got {command!r}"
                )
            if headers is not None:
                raise ValueError(f"MCP server {name!r}: headers= is for HTTP servers")
        if mode not in ("auto", "legacy", *MODERN_PROTOCOL_VERSIONS):
            raise ValueError(
                f"mode must be 'auto', 'legacy' or one of {list(MODERN_PROTOCOL_VERSIONS)}, "
                f"got {mode!r}"
            )
        if person_key is not None and not callable(person_key):
            raise TypeError(f"person_key must be a callable, got {person_key!r}")
        if not (headers is None or callable(headers) or isinstance(headers, Mapping)):
            raise TypeError(f"headers must be a mapping or a callable, got {headers!r}")
        for label, value in (
            ("max_result_chars", max_result_chars),
            ("max_image_bytes", max_image_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be an int >= 1, got {value!r}")
        self.name = name
        self.url = url
        self.command = list(command) if command is not None else None
        self._headers = headers
        self._person_key = person_key
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._include = frozenset(include) if include is not None else None
        self._exclude = frozenset(exclude)
        self._no_approval = frozenset(no_approval)
        self._elicitation = elicitation
        self._connect_timeout = _check_seconds("connect_timeout", connect_timeout, allow_none=False)
        self._call_timeout = _check_seconds("call_timeout", call_timeout, allow_none=True)
        self._idle_timeout = _check_seconds("idle_timeout", idle_timeout, allow_none=True)
        self._backoff = _check_seconds("backoff", backoff, allow_none=False)
        self._max_backoff = _check_seconds("max_backoff", max_backoff, allow_none=False)
        self.max_result_chars = max_result_chars
        self.max_image_bytes = max_image_bytes
        self._mode = mode
        self.required = required
        self._connections: dict[str, Connection] = {}
        self._listings: dict[str, dict[str, AgentTool]] = {}
        self._stale: set[str] = set()
        self._listing_locks: dict[str, asyncio.Lock] = {}
        self._info: dict[str, MCPToolInfo] = {}
        self._zett_names: dict[str, str] = {}
        self._closed = False

    def __repr__(self) -> str:
        where = self.url if self.url is not None else " ".join(self.command or ())
        return f"<MCPServer {self.name!r} {where}>"

    # -- the public surface ------------------------------------------------------------

    async def tools(self, context: AgentRunContext | None = None) -> list[AgentTool]:
        """The server's tools (filtered) as ``AgentTool``\\ s, listed with ``context``'s headers."""
        if self._closed:
            raise MCPConnectionError(f"MCP server {self.name!r} is shut down")
        key, headers = await self._key_for(context)
        return list((await self._listing(key, headers)).values())

    def tool_info(self, tool_name: str) -> MCPToolInfo | None:
        """What the last listing said about ``tool_name`` (own or zett name), or None."""
        info = self._info.get(tool_name)
        if info is None:
            info = self._info.get(self._zett_names.get(tool_name, self._zett_name(tool_name)))
        return info

    def needs_approval(self, tool_name: str) -> bool:
        """Whether a call of ``tool_name`` needs the person's approval.

        True unless the tool is in ``no_approval`` (own or zett name) or the server
        annotated it ``readOnlyHint: true`` without ``destructiveHint: true``; a tool not
        listed (yet) needs approval.
        """
        info = self.tool_info(tool_name)
        if info is None:
            prefix = f"{self.name}__"
            own = tool_name.removeprefix(prefix)
            return not ({tool_name, own, prefix + own} & self._no_approval)
        return info.needs_approval

    def attach(
        self,
        *,
        headers: HeadersSource | None = None,
        person_key: Callable[[AgentRunContext | None], str | None] | None = None,
        elicitation: ElicitationCallback | None = None,
    ) -> None:
        """Plug an application's seams into a server built elsewhere (before its first call).

        An application that hosts servers declared by others (the chat app's assistants)
        supplies the per-person ``headers`` and ``person_key`` and its own ``elicitation``
        answer here; each argument left None keeps what the constructor was given.
        """
        if headers is not None:
            if self.url is None:
                raise ValueError(f"MCP server {self.name!r}: headers= is for HTTP servers")
            if not (callable(headers) or isinstance(headers, Mapping)):
                raise TypeError(f"headers must be a mapping or a callable, got {headers!r}")
            self._headers = headers
        if person_key is not None:
            if not callable(person_key):
                raise TypeError(f"person_key must be a callable, got {person_key!r}")
            self._person_key = person_key
        if elicitation is not None:
            if not callable(elicitation):
                raise TypeError(f"elicitation must be a callable, got {elicitation!r}")
            self._elicitation = elicitation

    @property
    def configured_headers(self) -> HeadersSource:
        """The ``headers`` the server was built (or last attached) with."""
        return self._headers

    def cached_tool(self, tool_name: str) -> AgentTool | None:
        """``tool_name`` (its zett name) from any listing cached in this process, or None."""
        for listing in self._listings.values():
            found = listing.get(tool_name)
            if found is not None:
                return found
        return None

    def owns(self, tool_name: str) -> bool:
        """Whether ``tool_name`` is a zett name of this server (``<server>__...``)."""
        return tool_name.startswith(f"{self.name}__")

    @property
    def approval_names(self) -> ApprovalNames:
        """The live set of this server's tool names that need approval (``ApprovalNames``)."""
        return ApprovalNames(self.name, self.needs_approval, self._info)

    async def aclose(self) -> None:
        """Close every connection and wait until each is closed."""
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(connection.aclose() for connection in connections))

    async def __aenter__(self) -> MCPServer:
        self._closed = False
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def connection_count(self) -> int:
        """How many connections are open (or opening) now."""
        return sum(1 for connection in self._connections.values() if not connection.closed)

    # -- the extension -----------------------------------------------------------------

    async def on_tool(self, context: AgentRunContext) -> None:
        try:
            tools = await self.tools(context)
        except Exception as error:
            if self.required:
                raise
            logger.warning("MCP server %r: its tools are not offered: %s", self.name, error)
            return
        for agent_tool in tools:
            known = getattr(context.tools.get(agent_tool.name), "handler", None)
            if isinstance(known, _Handler) and known.server is self:
                continue  # also handed out as a tool of the agent: offer it once
            context.register_tool(agent_tool)

    # -- connections -------------------------------------------------------------------

    async def _key_for(self, context: AgentRunContext | None) -> tuple[str, dict[str, str]]:
        source = self._headers
        headers: Any = source(context) if callable(source) else source
        if inspect.isawaitable(headers):
            headers = await headers
        if headers is None:
            headers = {}
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise TypeError(f"MCP server {self.name!r}: headers must map str to str")
        headers = dict(headers)
        person = self._person_key(context) if self._person_key is not None else None
        if person is not None and not isinstance(person, str):
            raise TypeError(f"MCP server {self.name!r}: person_key must return a str or None")
        encoded = json.dumps([person, sorted(headers.items())], separators=(",", ":")).encode()
        return hashlib.sha256(encoded).hexdigest(), headers

    async def _connection_for(self, context: AgentRunContext | None) -> Connection:
        key, headers = await self._key_for(context)
        return self._connection(key, headers)

    def _connection(self, key: str, headers: dict[str, str]) -> Connection:
        if self._closed:
            raise MCPConnectionError(f"MCP server {self.name!r} is shut down")
        connection = self._connections.get(key)
        if (
            connection is not None
            and not connection.closed
            and connection.loop is asyncio.get_running_loop()
        ):
            return connection
        connection = Connection(
            server_name=self.name,
            make_transport=lambda: self._transport(headers),
            mode=self._mode,
            connect_timeout=self._connect_timeout,
            call_timeout=self._call_timeout,
            idle_timeout=self._idle_timeout,
            backoff=self._backoff,
            max_backoff=self._max_backoff,
            on_tools_changed=lambda: self._stale.add(key),
            elicitation_callback=self._on_elicitation,
            on_end=lambda ended: self._forget(key, ended),
            trace_context=current_context(),
        )
        self._connections[key] = connection
        # The owner task must not inherit the caller's context (its run, its tool call).
        contextvars.Context().run(connection.start)
        return connection

    def _forget(self, key: str, connection: Connection) -> None:
        if self._connections.get(key) is connection:
            del self._connections[key]

    def _transport(self, headers: dict[str, str]) -> Any:
        if self.url is not None:
            return _http_transport(self.url, headers, self._connect_timeout)
        assert self.command is not None
        parameters = StdioServerParameters(
            command=self.command[0], args=self.command[1:], env=self._env, cwd=self._cwd
        )
        return _watched(stdio_client(parameters))

    # -- tool listings -----------------------------------------------------------------

    def _zett_name(self, mcp_name: str, taken: Collection[str] = ()) -> str:
        """``<server>__<tool>``: unsafe characters become ``_``; a name too long, or taken by
        another tool after that, ends in a hash of the tool's own name instead."""
        name = f"{self.name}__{_UNSAFE.sub('_', mcp_name)}"
        if len(name) > 64 or name in taken:
            digest = hashlib.sha1(mcp_name.encode()).hexdigest()[:8]
            name = f"{name[:55]}_{digest}"
        return name

    def _wanted(self, mcp_name: str, zett_name: str) -> bool:
        if self._include is not None and not ({mcp_name, zett_name} & self._include):
            return False
        return not ({mcp_name, zett_name} & self._exclude)

    async def _listing(self, key: str, headers: dict[str, str]) -> dict[str, AgentTool]:
        listing = self._listings.get(key)
        if listing is not None and key not in self._stale:
            return listing
        lock = self._listing_locks.setdefault(key, asyncio.Lock())
        async with lock:
            listing = self._listings.get(key)
            if listing is not None and key not in self._stale:
                return listing
            self._stale.discard(key)
            listed = await self._connection(key, headers).list_tools()
            listing = {}
            for mcp_tool in listed:
                zett_name = self._zett_name(mcp_tool.name, listing)
                if not self._wanted(mcp_tool.name, zett_name) or zett_name in listing:
                    continue
                self._zett_names[mcp_tool.name] = zett_name
                annotations = (
                    mcp_tool.annotations.model_dump(by_alias=True, exclude_none=True)
                    if mcp_tool.annotations is not None
                    else {}
                )
                schema = dict(mcp_tool.input_schema or {"type": "object"})
                schema.pop("title", None)
                description = (mcp_tool.description or "").strip() or (
                    f"The {mcp_tool.title or mcp_tool.name} tool of the {self.name} MCP server."
                )
                listing[zett_name] = MCPTool(
                    name=zett_name,
                    description=description,
                    parameters=schema,
                    handler=_Handler(self, mcp_tool.name, zett_name, schema),
                )
                self._info[zett_name] = MCPToolInfo(
                    server=self.name,
                    name=mcp_tool.name,
                    zett_name=zett_name,
                    annotations=annotations,
                    needs_approval=annotations_need_approval(
                        (mcp_tool.name, zett_name), annotations, self._no_approval
                    ),
                )
            self._listings[key] = listing
            return listing


@asynccontextmanager
async def _watched(transport: Any) -> AsyncIterator[Any]:
    """``transport``'s streams, its read side relayed so that its end (a stdio child that
    exited, killed or crashed) is reported at once: the connection reconnects then, and the
    next call waits for the new child instead of failing on the dead one."""
    async with transport as (read, write):
        relay_in, relay_out = anyio.create_memory_object_stream[Any](0)

        async def relay() -> None:
            async with relay_in:
                try:
                    async for item in read:
                        await relay_in.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the session closed its side: not an end of the server
            note_transport_ended()

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            try:
                yield relay_out, write
            finally:
                group.cancel_scope.cancel()


@asynccontextmanager
async def _http_transport(
    url: str, headers: dict[str, str], connect_timeout: float
) -> AsyncIterator[Any]:
    """One HTTP client per connection, closed with it (in the connection's owner task).

    No read timeout at the HTTP level: ``call_timeout`` is the client's own bound on every
    request (it cancels the request cleanly), while an HTTP read timeout would fire on a
    quiet ``subscriptions/listen`` stream, or race that bound on a slow call, and an
    unhandled read timeout in the transport ends the whole session (every other call on
    it is lost).
    """
    timeout = httpx2.Timeout(connect_timeout, read=None)

    async def refused(response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            note_refusal(response.status_code)

    async with (
        httpx2.AsyncClient(
            headers=headers, timeout=timeout, event_hooks={"response": [refused]}
        ) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams
