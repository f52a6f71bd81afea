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

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import jsonschema
import mcp_types as types

from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.external import (
    ExternalEvent,
    ExternalEventExpired,
    ExternalEventExtension,
    utc_iso,
)
from zett_agent.mcp._connection import current_call

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext

    from zett_agent._context import AgentRunConfig, AgentRunContext
    from zett_agent.mcp._connection import Connection

__all__ = [
    "ELICITATION_EVENT",
    "ELICITATION_RESPONSE_EVENT",
    "ElicitationAnswer",
    "ElicitationCallback",
    "ElicitationRequest",
    "ElicitationWaits",
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


class ElicitationWaits(ExternalEventExtension):
    """The elicitation half of ``MCPServer``: routes a question to its tool call and
    answers it through the callback or, by default, an external wait."""

    _elicitation: ElicitationCallback | None

    def __init__(self, *, elicitation_timeout: float | None) -> None:
        super().__init__(
            response_event_name=ELICITATION_RESPONSE_EVENT,
            correlation_field="elicitation_id",
            timeout=elicitation_timeout,
        )
        #: The requested schema of each open question, by (session, elicitation id).
        self._schemas: dict[tuple[str, str], dict[str, Any]] = {}

    def accept(self, config: AgentRunConfig | None, event: ExternalEvent) -> bool:
        """Take an elicitation reply whose action and content are valid for its question."""
        if event.name != ELICITATION_RESPONSE_EVENT or config is None:
            return False
        payload = event.payload
        schema = self._schemas.get((config.session_id or "", str(payload.get("elicitation_id"))))
        if schema is None or payload.get("action") not in ACTIONS:
            return False
        content = payload.get("content")
        if payload["action"] == "accept":
            if not isinstance(content, dict):
                return False
            try:
                jsonschema.validate(content, schema)
            except (jsonschema.ValidationError, jsonschema.SchemaError):
                return False
        return super().accept(config, event)

    async def _on_elicitation(
        self, connection: Connection, context: ClientRequestContext, params: Any
    ) -> types.ElicitResult | types.ErrorData:
        call = current_call.get() or connection.only_call
        if call is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="zett answers elicitations only during one tool call of this connection",
            )
        if not isinstance(params, types.ElicitRequestFormParams):
            return types.ElicitResult(action="decline")  # URL mode is not offered
        request = ElicitationRequest(
            server=self.name,
            tool_name=call.zett_name,
            tool_call_id=call.tool_call_id,
            message=params.message,
            requested_schema=params.requested_schema.model_dump(by_alias=True, exclude_none=True)
            if hasattr(params.requested_schema, "model_dump")
            else dict(params.requested_schema),
            context=call.context,
        )
        if self._elicitation is not None:
            answer = await self._elicitation(request)
        elif call.context is not None and self in call.context.extensions:
            answer = await self._ask(request)
        else:
            answer = ElicitationAnswer("decline")
        content = answer.content if answer.action == "accept" else None
        return types.ElicitResult(action=answer.action, content=content)

    async def _ask(self, request: ElicitationRequest) -> ElicitationAnswer:
        """The default: an external wait, answered with ``mcp_elicitation_response``."""
        context = request.context
        assert context is not None
        elicitation_id = uuid.uuid4().hex
        key = (context.session_id, elicitation_id)
        self._schemas[key] = request.requested_schema
        try:
            async with self._wait_for_external_event(context, elicitation_id):
                expires_at = self._wait_expires_at(context, elicitation_id)
                await context.emit(
                    MCPElicitationEvent(
                        session_id=context.session_id,
                        elicitation_id=elicitation_id,
                        request=request,
                        expires_at=utc_iso(expires_at) if expires_at is not None else None,
                    )
                )
            reply = self._take_external_event(context)
        except ExternalEventExpired:
            return ElicitationAnswer("cancel")
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return ElicitationAnswer("cancel")  # the run was cancelled; the wait ended
        finally:
            self._schemas.pop(key, None)
        payload = reply.payload
        return ElicitationAnswer(
            payload["action"], payload.get("content") if payload["action"] == "accept" else None
        )
