"""An MCP server's question during a tool call, as a durable question on the chat page.

A server may ask the person something in the middle of a call (``elicitation/create``).
The app answers every such question here (``ask``, the servers' elicitation callback):

- **Asked.** ``ElicitationDesk`` emits the CUSTOM event ``mcp_elicitation`` with
  ``{tool_call_id, call_id, tool, server, message, requested_schema, response_event,
  expires_at}``. ``tool_call_id`` is the question's own id (``<call id>.mcp-<hex>``: a call
  may ask several questions, and an approved call keeps its approval's wait), ``call_id``
  the MCP tool call's. The run stores the wait before any socket sees the event
  (``agent_app.durable.waits``), so it survives the worker, and the page shows the
  schema's fields with Accept / Decline / Cancel and the deadline (``ZETT_REPLY_TIMEOUT``).
- **Answered.** The reply is the external event ``mcp_elicitation_response``
  ``{tool_call_id, action, content}``; an unknown action, or accepted content the schema
  refuses, is not taken. The answer goes back to the server, which finishes the call;
  nobody answering in time, or the run being stopped, answers ``cancel``. The tool's
  result records the answer (``attributes.reply``, kind ``elicitation``; for an approved
  call, whose ``reply`` is its approval, ``attributes.mcp_question``).
- **After a crash.** The worker's connection died with it, and the server's call with
  the connection: an MCP call cannot continue on a new connection. The question stays
  answerable (recovery keeps the run paused while it is open and in time); answering it
  continues the run, and the interrupted call ends with a tool error that says so and
  carries the answer, and is never sent again (the approval gate does not ask about it
  again either). A question nobody answers in time ends the call as expired.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app import conf
from agent_app.durable import waits
from agent_app.durable.persistence import shielded
from agent_app.models import ReplyWait, WaitKind, WaitStatus
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.external import (
    ExternalEvent,
    ExternalEventExpired,
    ExternalEventExtension,
    utc_iso,
)
from zett_agent.mcp import ELICITATION_EVENT, ELICITATION_RESPONSE_EVENT, ElicitationAnswer
from zett_agent.tools.base import ToolResult

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zett_agent.agent import AgentRunConfig, AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent
    from zett_agent.mcp import ElicitationRequest
    from zett_agent.messages import ToolCall

__all__ = ["ACTIONS", "ElicitationDesk", "ask", "desk", "interrupted_text", "reply_summary"]

ACTIONS = waits.ELICITATION_ACTIONS


def reply_summary(reply: dict[str, Any]) -> str:
    """An answer in words, for the model and the transcript."""
    action = reply.get("action")
    if action == "accept":
        content = reply.get("content") or {}
        fields = ", ".join(f"{key}: {value}" for key, value in content.items())
        return f"accepted ({fields})" if fields else "accepted"
    return "declined" if action == "decline" else "cancelled"


def interrupted_text(wait: ReplyWait) -> str:
    """The result of a call whose worker died while its server waited for an answer."""
    payload = wait.payload or {}
    server, tool = payload.get("server", "the MCP server"), payload.get("tool", "the tool")
    answer = (
        f"You answered: {reply_summary(wait.reply)}. "
        if isinstance(wait.reply, dict)
        else "Nobody answered. "
    )
    return (
        f"Interrupted: the server stopped while {server} waited for the answer to its "
        f"question ({payload.get('message', '')!r}). {answer}An MCP call cannot continue on "
        f"a new connection, so {tool} was not run again; call it again if it is still needed."
    )


def _stored_question(session_id: str, call_id: str) -> ReplyWait | None:
    """The newest question a server asked during ``call_id`` (any run), or None."""
    found = [
        wait
        for wait in ReplyWait.objects.filter(
            session_id=session_id, kind=WaitKind.ELICITATION, tool_call_id__startswith=call_id
        ).order_by("-created_at", "-pk")
        if (wait.payload or {}).get("call_id") == call_id
    ]
    return found[0] if found else None


def _settle_interrupted(session_id: str, call_id: str, wait_id: str) -> None:
    """The interrupted call has its result: its question and its approval are done."""
    waits.mark(session_id, wait_id, WaitStatus.DONE)
    waits.mark(session_id, call_id, WaitStatus.DONE)


class ElicitationDesk(ExternalEventExtension):
    """Asks the person a server's question and waits, durably (see the module docstring)."""

    name = "MCPElicitationExtension"

    def __init__(self, *, timeout: float | None = None) -> None:
        super().__init__(
            response_event_name=ELICITATION_RESPONSE_EVENT,
            correlation_field="tool_call_id",
            timeout=timeout,
        )
        #: The requested schema of each open question, by (session, question id).
        self._schemas: dict[tuple[str, str], dict[str, Any]] = {}
        #: The last answer each call got, by (request, call id): for its result's record.
        self._answers: dict[tuple[str, str], dict[str, Any]] = {}
        #: Calls of a continuation that were interrupted mid-question, by (request, call).
        self._interrupted: dict[tuple[str, str], ReplyWait | None] = {}

    def accept(self, config: AgentRunConfig | None, event: ExternalEvent) -> bool:
        if event.name != ELICITATION_RESPONSE_EVENT or config is None:
            return False
        key = (config.session_id or "", str(event.payload.get("tool_call_id")))
        schema = self._schemas.get(key)
        if schema is None or not waits.valid_elicitation_reply(event.payload, schema):
            return False
        return super().accept(config, event)

    async def ask(self, request: ElicitationRequest) -> ElicitationAnswer:
        """Show the question, wait for the answer (or the deadline), and return it."""
        context = request.context
        if context is None or request.tool_call_id is None:
            return ElicitationAnswer("decline")
        call_id = request.tool_call_id
        wait_id = f"{call_id}.mcp-{uuid.uuid4().hex[:12]}"
        key = (context.session_id, wait_id)
        self._schemas[key] = request.requested_schema
        status = WaitStatus.DONE
        try:
            async with self._wait_for_external_event(context, wait_id):
                expires_at = self._wait_expires_at(context, wait_id)
                payload = {
                    "tool_call_id": wait_id,
                    "call_id": call_id,
                    "tool": request.tool_name,
                    "server": request.server,
                    "message": request.message,
                    "requested_schema": request.requested_schema,
                    "response_event": ELICITATION_RESPONSE_EVENT,
                    "expires_at": utc_iso(expires_at) if expires_at is not None else None,
                }
                await context.emit(
                    AgentEvent(
                        AgentEventType.CUSTOM,
                        context.session_id,
                        name=ELICITATION_EVENT,
                        payload=payload,
                    )
                )
            reply = self._take_external_event(context).payload
        except ExternalEventExpired:
            status = WaitStatus.EXPIRED
            reply = {"action": "cancel", "expired": True}
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            status = WaitStatus.CANCELLED
            reply = {"action": "cancel"}  # the run was stopped; the wait ended
        finally:
            self._schemas.pop(key, None)
        await shielded(database_sync_to_async(waits.mark)(context.session_id, wait_id, status))
        action = reply["action"]
        record = {"kind": "elicitation", "question": request.message, "action": action}
        if action == "accept":
            record["content"] = reply.get("content")
        if reply.get("expired"):
            record["expired"] = True
        self._answers[(context.request_id, call_id)] = record
        return ElicitationAnswer(action, reply.get("content") if action == "accept" else None)

    # --- continuations -----------------------------------------------------------------

    async def interrupted(self, context: AgentRunContext, call: ToolCall) -> ReplyWait | None:
        """The stored question of ``call`` when a continuation runs a call that was cut
        off while its server waited for an answer; None for every other call."""
        if not context.resuming or "__" not in call.name:
            return None
        key = (context.request_id, call.id)
        if key not in self._interrupted:
            self._interrupted[key] = await database_sync_to_async(_stored_question)(
                context.session_id, call.id
            )
        return self._interrupted[key]

    async def on_tool_call(
        self,
        context: AgentRunContext,
        call: ToolCall,
        call_next: Callable[[ToolCall], Awaitable[Any]],
    ) -> Any:
        wait = await self.interrupted(context, call)
        if wait is None:
            return await call_next(call)
        await shielded(
            database_sync_to_async(_settle_interrupted)(
                context.session_id, call.id, wait.tool_call_id
            )
        )
        record: dict[str, Any] = {"kind": "elicitation", "question": wait.payload.get("message")}
        if isinstance(wait.reply, dict):
            record.update(action=wait.reply.get("action"), content=wait.reply.get("content"))
        return ToolResult(interrupted_text(wait), success=False, attributes={"reply": record})

    async def after_tool(
        self,
        context: AgentRunContext,
        call: ToolCall,
        result: ToolResult,
        error: Exception | None,
    ) -> None:
        record = self._answers.pop((context.request_id, call.id), None)
        if record is None:
            return
        # An approved call's ``reply`` is its approval; the question is kept beside it.
        key = "reply" if "reply" not in result.attributes else "mcp_question"
        result.attributes[key] = record

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        await super().on_event(context, event)
        from zett_agent.extensions.events import PhaseTransitionEvent

        if isinstance(event, PhaseTransitionEvent) and event.current_phase.is_terminal:
            for table in (self._answers, self._interrupted):
                for key in [key for key in table if key[0] == context.request_id]:
                    del table[key]


#: One desk per ``ZETT_REPLY_TIMEOUT`` in use (tests change it), shared by every chat.
_DESKS: dict[float, ElicitationDesk] = {}


def desk() -> ElicitationDesk:
    """The question desk for the current ``ZETT_REPLY_TIMEOUT``."""
    timeout = float(conf.ZETT_REPLY_TIMEOUT or 0)
    found = _DESKS.get(timeout)
    if found is None:
        found = _DESKS[timeout] = ElicitationDesk(timeout=timeout or None)
    return found


async def ask(request: ElicitationRequest) -> ElicitationAnswer:
    """The app's elicitation callback: the request's desk asks; without one, decline."""
    context = request.context
    if context is not None:
        for extension in context.extensions:
            if isinstance(extension, ElicitationDesk):
                return await extension.ask(request)
    return ElicitationAnswer("decline")
