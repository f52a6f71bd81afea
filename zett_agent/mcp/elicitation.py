"""Elicitation: a server asks the person a question in the middle of a tool call.

The seam is one callback, ``MCPServer(elicitation=callback)``: it receives an
``ElicitationRequest`` (which server, which tool call, the message and the requested
schema) and returns an ``ElicitationAnswer`` (``accept`` with content, ``decline`` or
``cancel``). An application with durable questions plugs its own callback in here.

Without a callback, an ``MCPServer`` passed in ``extensions=`` answers through an external
wait, exactly like ``ask_user``: it emits an ``MCPElicitationEvent`` (CUSTOM event
``mcp_elicitation``) and waits for an ``mcp_elicitation_response`` external event whose
``elicitation_id`` matches, sent with ``Agent.emit_external_event``. The reply's payload is
``{"elicitation_id", "action", "content"}``; a reply whose action is unknown, or whose
accepted content does not match the requested schema, is refused (``emit_external_event``
answers ``[]``) and the question stays open. ``elicitation_timeout`` gives each question a
deadline (the event's ``expires_at``); a question nobody answers in time is answered
``cancel``, and so is one whose request is cancelled. Servers handed out as tools only
(``await server.tools()``) without a callback decline every elicitation: nobody could
answer it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from zett_agent.events import AgentEvent, AgentEventType

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext

__all__ = [
    "ELICITATION_EVENT",
    "ELICITATION_RESPONSE_EVENT",
    "ElicitationAnswer",
    "ElicitationCallback",
    "ElicitationRequest",
    "MCPElicitationEvent",
]

ELICITATION_EVENT = "mcp_elicitation"
ELICITATION_RESPONSE_EVENT = "mcp_elicitation_response"
ACTIONS = ("accept", "decline", "cancel")


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """One question a server asks during one tool call."""

    #: The ``MCPServer``'s name and the tool's zett name (``<server>__<tool>``).
    server: str
    tool_name: str
    tool_call_id: str | None
    message: str
    #: The JSON Schema (flat object of primitive fields) the answer's content must match.
    requested_schema: dict[str, Any]
    #: The request the tool call belongs to (None outside a run).
    context: AgentRunContext | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    """How the person answered: ``accept`` (with ``content``), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {self.action!r}")
        if self.content is not None and not isinstance(self.content, dict):
            raise TypeError(f"content must be a dict or None, got {type(self.content).__name__}")


ElicitationCallback = Callable[[ElicitationRequest], Awaitable[ElicitationAnswer]]


class MCPElicitationEvent(AgentEvent):
    """CUSTOM event ``mcp_elicitation``: show the question; reply with ``response_event``."""

    def __init__(
        self,
        *,
        session_id: str,
        elicitation_id: str,
        request: ElicitationRequest,
        expires_at: str | None = None,
    ) -> None:
        payload: dict[str, Any] = {
            "session_id": session_id,
            "elicitation_id": elicitation_id,
            "tool_call_id": request.tool_call_id,
            "server": request.server,
            "tool_name": request.tool_name,
            "message": request.message,
            "requested_schema": request.requested_schema,
            "response_event": ELICITATION_RESPONSE_EVENT,
        }
        if expires_at is not None:
            payload["expires_at"] = expires_at
        super().__init__(AgentEventType.CUSTOM, session_id, name=ELICITATION_EVENT, payload=payload)

    @property
    def elicitation_id(self) -> str:
        return self.payload["elicitation_id"]  # type: ignore[index]

    @property
    def question(self) -> str:
        """The server's message to the person."""
        return self.payload["message"]  # type: ignore[index]

    @property
    def requested_schema(self) -> dict[str, Any]:
        return self.payload["requested_schema"]  # type: ignore[index]
