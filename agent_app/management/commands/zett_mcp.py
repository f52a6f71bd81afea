"""``python manage.py zett_mcp list``: connect to every MCP server and list its tools.

The servers are the site's (``ZETT_MCP_SERVERS``) and every assistant's own
(``Assistant.mcp_servers``), each listed once. For each server it prints the tools with
whether a call needs approval, or the one error that kept it from listing them; the
command exits with status 1 when any server failed. Listing uses each server's own
headers (no person's credentials: ``mcp_headers`` is asked only inside a chat).
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_app.agents import mcp
from agent_app.assistants import registry


def _servers() -> list[tuple[str, Any]]:
    """``(who offers it, server)`` for every distinct server."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()
    for server in mcp.site_servers():
        seen.add(id(server))
        found.append(("ZETT_MCP_SERVERS", server))
    for assistant in registry.all():
        for server in assistant.mcp_servers:
            if id(server) not in seen:
                seen.add(id(server))
                found.append((f"assistant {assistant.id!r}", server))
    return found


class Command(BaseCommand):
    help = "Connect to every configured MCP server and list its tools (or say why not)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["list"], help="list: the tools of each server")
        parser.add_argument(
            "--timeout", type=float, default=15.0, help="seconds to wait for each server"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            servers = _servers()
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from None
        if not servers:
            self.stdout.write("No MCP server is configured (ZETT_MCP_SERVERS, mcp_servers).")
            return
        failed = asyncio.run(self._list(servers, options["timeout"]))
        if failed:
            raise CommandError(f"{failed} of {len(servers)} MCP server(s) could not be listed")

    async def _list(self, servers: list[tuple[str, Any]], seconds: float) -> int:
        failed = 0
        for owner, server in servers:
            self.stdout.write(f"{server.name} ({owner}): {server!r}")
            try:
                async with server:
                    tools = await asyncio.wait_for(server.tools(), seconds)
            except Exception as error:  # one clear line per server, then the next one
                failed += 1
                reason = str(error) or type(error).__name__
                if isinstance(error, TimeoutError):
                    reason = f"no answer within {seconds:g} s"
                self.stdout.write(self.style.ERROR(f"  error: {type(error).__name__}: {reason}"))
                continue
            if not tools:
                self.stdout.write("  (no tools)")
            for listed in tools:
                gate = "needs approval" if server.needs_approval(listed.name) else "read-only"
                self.stdout.write(f"  {listed.name}  [{gate}]  {listed.description[:80]}")
        return failed
