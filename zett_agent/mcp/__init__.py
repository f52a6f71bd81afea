"""MCP servers as zett tools (the optional ``mcp`` extra: the official ``mcp`` package).

``MCPServer(name, url=..., headers=...)`` (streamable HTTP) or ``MCPServer(name,
command=[...], env=..., cwd=...)`` (stdio) offers a server's tools as ``<name>__<tool>``.
See ``zett_agent.mcp.server`` for connections and listings, ``zett_agent.mcp.approval``
for which calls need approval, ``zett_agent.mcp._connection``
for who owns a connection and when a call is retried, ``zett_agent.mcp.results`` for what
a result becomes, ``zett_agent.mcp.elicitation`` for questions a server asks,
``zett_agent.mcp.progress`` for a running call's progress and log lines, and
``zett_agent.mcp.security`` for the executable allow-list of configured stdio servers.
"""

from zett_agent.mcp.approval import ApprovalNames, MCPToolInfo
from zett_agent.mcp.elicitation import (
    ELICITATION_EVENT,
    ELICITATION_RESPONSE_EVENT,
    ElicitationAnswer,
    ElicitationCallback,
    ElicitationRequest,
    MCPElicitationEvent,
)
from zett_agent.mcp.errors import MCPCallLost, MCPConnectionError, MCPError, MCPToolArgumentsError
from zett_agent.mcp.progress import PROGRESS_EVENT, MCPProgressEvent
from zett_agent.mcp.results import CUT_MARKER
from zett_agent.mcp.security import DEFAULT_ALLOWED_EXECUTABLES, check_stdio_command
from zett_agent.mcp.server import HeadersSource, MCPServer, MCPTool

__all__ = [
    "CUT_MARKER",
    "DEFAULT_ALLOWED_EXECUTABLES",
    "ELICITATION_EVENT",
    "ELICITATION_RESPONSE_EVENT",
    "PROGRESS_EVENT",
    "ApprovalNames",
    "ElicitationAnswer",
    "ElicitationCallback",
    "ElicitationRequest",
    "HeadersSource",
    "MCPCallLost",
    "MCPConnectionError",
    "MCPElicitationEvent",
    "MCPError",
    "MCPProgressEvent",
    "MCPServer",
    "MCPTool",
    "MCPToolArgumentsError",
    "MCPToolInfo",
    "check_stdio_command",
]
