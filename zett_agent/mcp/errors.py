"""The errors an MCP tool call can end with; each becomes a failed tool result."""

from __future__ import annotations

__all__ = ["MCPCallLost", "MCPConnectionError", "MCPError", "MCPToolArgumentsError"]


class MCPError(Exception):
    """Base class of zett's MCP errors."""


class MCPConnectionError(MCPError, ConnectionError):
    """No connection to the server could be had (unreachable, closed, or shut down)."""


class MCPCallLost(MCPError, ConnectionError):
    """The connection died after the call was sent: it may have run, so it is not repeated."""


class MCPToolArgumentsError(MCPError, ValueError):
    """The model's arguments do not match the tool's JSON Schema; the server was not called."""
