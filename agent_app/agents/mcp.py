"""MCP servers in the chat app: an assistant's own, and the site's (``ZETT_MCP_SERVERS``).

Each chat's agent gets the servers of its assistant (``Assistant.mcp_servers``) and the
site-wide servers, as extensions: a server lists its tools for every request (from its
cache) and registers them. What the app adds to ``zett_agent.mcp``:

- **People.** Every HTTP server is given the headers of the request's person,
  ``assistant.mcp_headers(server, user)`` on top of the server's own, asked once per request
  and server (in a thread: it may use the ORM). When that gives a person credentials of
  their own, the person is part of the connection key too, so two people never share a
  connection (even with equal credentials); when it gives none, everyone shares one.
- **Approval.** ``approval_names(assistant)`` is the live set the assistant's approval
  gate asks: its ``approval_required`` tools and every MCP tool whose annotations lack
  ``readOnlyHint: true`` (or carry ``destructiveHint: true``), unless ``mcp_no_approval``
  names it (its own or its prefixed name). It follows every new listing, so a tool a
  server lists later is gated too. The gate is the app's durable one (digest, stored,
  at most once, re-asked by recovery).
- **Questions.** A server's elicitation becomes a durable question
  (``agent_app.agents.elicitation``). A stdio server runs one child per person (closed
  after its ``idle_timeout``), so two people's questions on one server never mix.
- **Configured servers.** ``ZETT_MCP_SERVERS`` is the ``mcpServers`` JSON shape (a dict, or
  its JSON text): ``command``/``args``/``env``/``cwd`` for stdio, ``url``/``headers`` for
  streamable HTTP, with ``${VAR}`` taken from the environment. A configured stdio
  command's executable must be in ``ZETT_MCP_ALLOWED_COMMANDS``; the child's environment is
  what ``env`` gives (plus ``HOME``, ``PATH``, ``SHELL``, ``TERM``). The servers are built
  once per value of the setting and shared by every assistant.
- **Closing.** ``close_all()`` closes every connection of every server (a worker's
  shutdown); an idle connection closes by itself after the server's ``idle_timeout``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.core.exceptions import ImproperlyConfigured

from agent_app import conf
from agent_app.assistants.current import current_chat, current_user
from agent_app.process import shutdown

if TYPE_CHECKING:
    from agent_app.assistants import Assistant
    from zett_agent.agent import AgentRunContext
    from zett_agent.extensions.base import AgentExtension
    from zett_agent.mcp import MCPServer
    from zett_agent.tools.base import AgentTool

__all__ = [
    "approval_names",
    "approval_tool",
    "close_all",
    "extensions_for",
    "parse_servers",
    "servers_of",
    "settled_elsewhere",
    "site_servers",
]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STDIO_KEYS = frozenset({"type", "command", "args", "env", "cwd", "include", "exclude"})
_HTTP_KEYS = frozenset({"type", "url", "headers", "include", "exclude"})
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamableHttp", "streamable_http"})
#: The request-metadata key of the per-request cache of people's headers.
_PEOPLE = "zett_mcp_people"


# --- ZETT_MCP_SERVERS --------------------------------------------------------------------


def _expand(value: Any, where: str, environ: Mapping[str, str]) -> Any:
    """``${VAR}`` in every string of ``value`` replaced from ``environ`` (unset: an error)."""
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise ImproperlyConfigured(
                    f"ZETT_MCP_SERVERS {where}: the environment variable {name} is not set"
                )
            return environ[name]

        return _VARIABLE.sub(replace, value)
    if isinstance(value, list):
        return [_expand(item, where, environ) for item in value]
    if isinstance(value, dict):
        return {key: _expand(item, where, environ) for key, item in value.items()}
    return value


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ImproperlyConfigured(f"ZETT_MCP_SERVERS {what} must be a list of strings")
    return value


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ImproperlyConfigured(f"ZETT_MCP_SERVERS {what} must map strings to strings")
    return value


def _entries(config: Any) -> dict[str, Any]:
    if isinstance(config, str):
        if not config.strip():
            return {}
        try:
            config = json.loads(config)
        except ValueError as error:
            raise ImproperlyConfigured(f"ZETT_MCP_SERVERS is not valid JSON: {error}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ImproperlyConfigured(
            f'ZETT_MCP_SERVERS must be {{"mcpServers": {{...}}}}, got {type(config).__name__}'
        )
    servers = config.get("mcpServers", config) if "mcpServers" in config else config
    if not isinstance(servers, dict):
        raise ImproperlyConfigured("ZETT_MCP_SERVERS: mcpServers must be an object")
    return servers


def _http_server(name: str, where: str, entry: dict[str, Any], filters: dict) -> MCPServer:
    from zett_agent.mcp import MCPServer

    kind, unknown = entry.get("type"), set(entry) - _HTTP_KEYS
    if unknown or (kind is not None and kind not in _HTTP_TYPES):
        raise ImproperlyConfigured(
            f"ZETT_MCP_SERVERS {where}: an HTTP server takes url, headers, include "
            f"and exclude (got {sorted(unknown) or kind!r})"
        )
    headers = _string_map(entry.get("headers", {}), f"{where} headers")
    return MCPServer(name, url=entry["url"], headers=headers, **filters)


def _stdio_server(
    name: str, where: str, entry: dict[str, Any], filters: dict, allowed: Any
) -> MCPServer:
    from zett_agent.mcp import MCPServer, check_stdio_command

    kind, unknown = entry.get("type"), set(entry) - _STDIO_KEYS
    if unknown or kind not in (None, "stdio"):
        raise ImproperlyConfigured(
            f"ZETT_MCP_SERVERS {where}: a stdio server takes command, args, env, "
            f"cwd, include and exclude (got {sorted(unknown) or kind!r})"
        )
    command = entry["command"]
    if not isinstance(command, str) or not command:
        raise ImproperlyConfigured(f"ZETT_MCP_SERVERS {where}: command must be a non-empty string")
    argv = [command, *_strings(entry.get("args", []), f"{where} args")]
    try:
        check_stdio_command(argv, allowed)
    except ValueError as error:
        raise ImproperlyConfigured(
            f"ZETT_MCP_SERVERS {where}: {error} (ZETT_MCP_ALLOWED_COMMANDS)"
        ) from None
    env = _string_map(entry.get("env", {}), f"{where} env")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ImproperlyConfigured(f"ZETT_MCP_SERVERS {where}: cwd must be a string")
    return MCPServer(name, command=argv, env=env, cwd=cwd, **filters)


def parse_servers(
    config: Any,
    *,
    allowed_commands: Any = None,
    environ: Mapping[str, str] | None = None,
) -> list[MCPServer]:
    """The servers ``config`` (the ``mcpServers`` shape) declares; ``ImproperlyConfigured``
    naming the server and the problem for anything wrong."""
    environ = os.environ if environ is None else environ
    allowed = conf.ZETT_MCP_ALLOWED_COMMANDS if allowed_commands is None else allowed_commands
    servers: list[MCPServer] = []
    for name, entry in _entries(config).items():
        where = f"server {name!r}"
        if not isinstance(entry, dict):
            raise ImproperlyConfigured(f"ZETT_MCP_SERVERS {where} must be an object")
        entry = _expand(entry, where, environ)
        filters = {
            key: _strings(entry[key], f"{where} {key}")
            for key in ("include", "exclude")
            if key in entry
        }
        try:
            if "url" in entry:
                servers.append(_http_server(name, where, entry, filters))
            elif "command" in entry:
                servers.append(_stdio_server(name, where, entry, filters, allowed))
            else:
                raise ImproperlyConfigured(
                    f"ZETT_MCP_SERVERS {where} needs a url (HTTP) or a command (stdio)"
                )
        except (ValueError, TypeError) as error:
            raise ImproperlyConfigured(f"ZETT_MCP_SERVERS {where}: {error}") from None
    return servers


#: The site's servers, built for one value of the setting (tests change it).
_site: tuple[str, list[MCPServer]] | None = None
#: Every server the app has handed to an agent (closed at shutdown).
_handed_out: dict[int, MCPServer] = {}


def site_servers() -> list[MCPServer]:
    """The servers of ``ZETT_MCP_SERVERS``, built once per value of the setting."""
    global _site
    config = conf.ZETT_MCP_SERVERS
    key = json.dumps(config, sort_keys=True, default=str)
    if _site is None or _site[0] != key:
        _site = (key, parse_servers(config))
    return _site[1]


# --- people ------------------------------------------------------------------------------


def _person_of(user: Any, chat: Any) -> str:
    if getattr(user, "is_authenticated", False):
        return f"user:{user.pk}"
    return f"browser:{chat.browser_key or chat.pk}"


def _stdio_person(context: AgentRunContext | None) -> str | None:
    """Each person's calls go to a stdio child of their own: a question the server asks
    is then always of the one call in flight (a server that predates the protocol's
    per-request questions cannot say which call asks), and nothing one person's call left
    in the child's memory reaches another. Outside a run: the shared child."""
    if context is None:
        return None
    try:
        return _person_of(current_user(), current_chat())
    except LookupError:
        return None


async def _own_headers(own: Any, context: AgentRunContext | None) -> dict[str, str]:
    """The headers the server was built with (a mapping, or its own callable's answer)."""
    if callable(own):
        own = own(context)
        if inspect.isawaitable(own):
            own = await own
    return dict(own) if isinstance(own, Mapping) else {}


async def _people(
    server: MCPServer, own: Any, context: AgentRunContext | None
) -> tuple[dict, str | None]:
    """``(headers, person key)`` of the request's person for ``server`` (once a request):
    ``own``, the headers the server was built with, and the assistant's for the person."""
    from agent_app.assistants import registry

    base = await _own_headers(own, context)
    try:
        user, chat = current_user(), current_chat()
    except LookupError:
        return base, None  # outside a run (``zett_mcp list``): the server's own headers
    cache = context.metadata.setdefault(_PEOPLE, {}) if context is not None else {}
    known = cache.get(server.name)
    if known is not None:
        return known
    assistant = registry.resolve(chat.assistant)
    given = await database_sync_to_async(assistant.mcp_headers)(server, user)
    if given is not None and not (
        isinstance(given, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in given.items())
    ):
        raise TypeError(
            f"{type(assistant).__name__}.mcp_headers must return a dict of str to str or None, "
            f"got {given!r}"
        )
    person = _person_of(user, chat) if given else None
    found = cache[server.name] = ({**base, **(given or {})}, person)
    return found


def _bind(server: MCPServer) -> MCPServer:
    """Give ``server`` the app's seams once: people's headers and durable questions."""
    if id(server) in _handed_out:
        return server
    from agent_app.agents.elicitation import ask

    own = server.configured_headers

    async def headers(context: AgentRunContext | None) -> dict[str, str]:
        return (await _people(server, own, context))[0]

    def person_key(context: AgentRunContext | None) -> str | None:
        if context is None:
            return None
        known = context.metadata.get(_PEOPLE, {}).get(server.name)
        return known[1] if known is not None else None

    if server.url is not None:
        server.attach(headers=headers, person_key=person_key, elicitation=ask)
    else:
        server.attach(person_key=_stdio_person, elicitation=ask)
    _handed_out[id(server)] = server
    return server


# --- an assistant's servers --------------------------------------------------------------


def servers_of(assistant: Assistant) -> list[MCPServer]:
    """The assistant's own servers, then the site's (each bound to the app once)."""
    own = list(assistant.mcp_servers)
    names = {server.name for server in own}
    site = [server for server in site_servers() if server.name not in names]
    return [_bind(server) for server in (*own, *site)]


class _AssistantApprovals(AbstractSet[str]):
    """The live set of tool names an assistant's approval gate asks about."""

    __slots__ = ("_assistant", "_static")

    def __init__(self, assistant: Assistant) -> None:
        self._assistant = assistant
        self._static = frozenset(assistant.approval_required)

    def _exempt(self, server: MCPServer, name: str) -> bool:
        exempt = set(self._assistant.mcp_no_approval)
        own = name.removeprefix(f"{server.name}__")
        info = server.tool_info(name)
        if info is not None:
            own = info.name
        return bool({name, own} & exempt)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self._static:
            return True
        for server in servers_of(self._assistant):
            if server.owns(name):
                return not self._exempt(server, name) and server.needs_approval(name)
        return False

    def __iter__(self) -> Iterator[str]:
        names = set(self._static)
        for server in servers_of(self._assistant):
            names.update(name for name in server.approval_names if name in self)
        return iter(sorted(names))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def approval_names(assistant: Assistant) -> AbstractSet[str]:
    """What ``assistant``'s approval gate asks about (a live set; see the module docstring)."""
    return _AssistantApprovals(assistant)


class _Unlisted:
    """A stand-in tool for a call whose server listing this process has not seen yet:
    recovery shows the arguments as they are (the gate validates them when the call runs,
    and an MCP tool's validation leaves valid arguments unchanged, so the digest holds)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ValueError("Arguments must be a JSON object")
        return arguments


def approval_tool(assistant: Assistant, name: str) -> AgentTool | _Unlisted | None:
    """The MCP tool ``name`` of the assistant's servers, for recovery to re-ask its approval."""
    for server in servers_of(assistant):
        if server.owns(name):
            return server.cached_tool(name) or _Unlisted(name)
    return None


def extensions_for(assistant: Assistant) -> list[AgentExtension]:
    """What an agent of ``assistant`` gets for MCP: its servers and the question desk."""
    servers = servers_of(assistant)
    if not servers:
        return []
    from agent_app.agents.elicitation import desk

    return [desk(), *servers]


async def settled_elsewhere(context: AgentRunContext, call: Any) -> bool:
    """Whether a continuation's call is an MCP call cut off mid-question (its approval is
    not asked again: the question desk ends it).

    The desk's module is only imported once an assistant has MCP servers (``extensions_for``);
    until then no desk exists, and importing it here would need the ``mcp`` extra on sites
    that use no MCP at all."""
    elicitation = sys.modules.get("agent_app.agents.elicitation")
    if elicitation is None:
        return False
    for extension in context.extensions:
        if isinstance(extension, elicitation.ElicitationDesk):
            return await extension.interrupted(context, call) is not None
    return False


async def close_all() -> None:
    """Close every connection of every server handed out (a worker's shutdown)."""
    servers = list(_handed_out.values())
    await asyncio.gather(*(server.aclose() for server in servers), return_exceptions=True)


shutdown.at_drain(close_all)
