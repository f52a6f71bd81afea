"""``ApprovalExtension``: a listed tool runs only after the person approves the call.

For a call to one of ``tool_names``, ``before_tool`` registers a wait, emits the CUSTOM
event ``approval_requested`` ``{tool_call_id, tool, arguments, digest, expires_at}`` and
suspends until the client replies with the external event ``approval_response``
``{tool_call_id, approved, digest}``. ``digest`` binds the approval to what was shown (a
SHA-256 of the tool name and the validated arguments, ``digest_of``): a reply carrying
another digest is refused. ``expires_at`` is the reply's deadline (ISO 8601), or None
without a ``timeout``.

The verdict is enforced one step later, in the ``on_tool_call`` middleware: a hook that
raises would fail the whole request, while a middleware that raises only fails this tool
call, so a denied (or expired, or unanswered) call never runs and the model gets an
unsuccessful ``ToolMessage`` saying why, and carries on. Right before an approved call runs,
``before_execute`` is awaited (an application records there that the call started, so a
crash never leads to running it twice). Arguments changed after the approval are refused.

Every result of a gated call says how the person answered, in its attributes:
``{"reply": {"kind": "approval", "approved": true|false}}`` (or ``"expired": true``).

Waiting, cancellation and duplicate replies are the base class's business
(``ExternalEventExtension``): cancelling the request cancels the wait, a second reply for
the same call is rejected. Calls with invalid arguments are not shown to the person at
all: the tool fails on validation as any other tool would.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Awaitable, Callable, Collection
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.events import PhaseTransitionEvent
from zett_agent.extensions.external import (
    ExternalEvent,
    ExternalEventExpired,
    ExternalEventExtension,
)
from zett_agent.tools.base import ToolResult

if TYPE_CHECKING:
    from zett_agent._context import AgentRunConfig, AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent
    from zett_agent.messages import ToolCall

__all__ = [
    "APPROVAL_REQUESTED_EVENT",
    "APPROVAL_RESPONSE_EVENT",
    "ApprovalDenied",
    "ApprovalExtension",
    "digest_of",
]

APPROVAL_REQUESTED_EVENT = "approval_requested"
APPROVAL_RESPONSE_EVENT = "approval_response"


class ApprovalDenied(PermissionError):
    """The person did not approve a tool call; its ToolMessage carries this text."""


def digest_of(tool: str, arguments: Any) -> str:
    """What an approval is bound to: the tool's name and the exact arguments shown."""
    canonical = json.dumps(
        {"tool": tool, "arguments": arguments}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class ApprovalExtension(ExternalEventExtension):
    """Asks the person to approve each call of the listed tools before it runs.

    ``tool_names``: a set-like object (a ``set``, or a live view such as an MCP server's
    ``approval_names``) is kept as given and asked ``name in tool_names`` at each call, so
    names added after construction (tools a server lists later) are gated too; any other
    collection is copied.
    """

    def __init__(self, tool_names: Collection[str], *, timeout: float | None = None) -> None:
        super().__init__(
            response_event_name=APPROVAL_RESPONSE_EVENT,
            correlation_field="tool_call_id",
            timeout=timeout,
        )
        self.tools_needing_approval: Collection[str] = (
            tool_names if isinstance(tool_names, AbstractSet) else frozenset(tool_names)
        )
        #: Digest of what each waiting call showed the user, by (session, call id).
        self._shown: dict[tuple[str, str], str] = {}
        #: Verdicts between ``before_tool`` and ``on_tool_call``, keyed by request and call:
        #: the arguments the user approved, or the reason the call may not run.
        self._verdicts: dict[tuple[str, str], _Verdict] = {}
        #: What the user answered, from the gate to ``after_tool`` (for the result's record).
        self._answers: dict[tuple[str, str], _Verdict] = {}

    async def before_tool(self, context: AgentRunContext, call: ToolCall) -> None:
        agent_tool = context.tools.get(call.name)
        if call.name not in self.tools_needing_approval or agent_tool is None:
            return
        payload = self.request_payload(call, agent_tool)
        if payload is None:
            return  # the call fails on validation anyway; never ask about it
        shown = (context.session_id, call.id)
        self._shown[shown] = payload["digest"]
        try:
            async with self._wait_for_external_event(context, call.id):
                expires_at = self._wait_expires_at(context, call.id)
                payload["expires_at"] = (
                    None if expires_at is None else expires_at.isoformat(timespec="milliseconds")
                )
                await context.emit(
                    AgentEvent(
                        AgentEventType.CUSTOM,
                        context.session_id,
                        name=APPROVAL_REQUESTED_EVENT,
                        payload=payload,
                    )
                )
        finally:
            self._shown.pop(shown, None)
        try:
            reply = self._take_external_event(context)
        except ExternalEventExpired:
            self._verdicts[(context.request_id, call.id)] = _Verdict(
                denial=f"Nobody answered in time; the {call.name} call did not run.",
                expired=True,
            )
            return
        approved = reply.payload.get("approved")
        if approved is True:
            verdict = _Verdict(approved_arguments=copy.deepcopy(call.arguments), approved=True)
        elif approved is False:
            verdict = _Verdict(
                denial=f"The user denied the {call.name} call; it did not run.", approved=False
            )
        else:
            verdict = _Verdict(
                denial=f"The approval reply for {call.name} had no boolean 'approved' "
                f"(got {approved!r}); the call did not run."
            )
        self._verdicts[(context.request_id, call.id)] = verdict

    def accept(self, config: AgentRunConfig | None, event: ExternalEvent) -> bool:
        """Refuse an approval given for other arguments than the ones shown (its digest)."""
        digest = event.payload.get("digest")
        call_id = event.payload.get("tool_call_id")
        if digest is not None and config is not None and config.session_id is not None:
            shown = (
                self._shown.get((config.session_id, call_id)) if isinstance(call_id, str) else None
            )
            if shown is not None and digest != shown:
                return False
        return super().accept(config, event)

    def request_payload(self, call: ToolCall, tool: Any = None) -> dict[str, Any] | None:
        """The ``approval_requested`` payload for ``call``; None if its arguments are invalid.

        ``tool`` is the call's ``AgentTool`` when there is no request context to look it
        up in (recovery building a wait for a call that never started).
        """
        try:
            arguments = _json_safe(tool.validate_arguments(call.arguments)) if tool else None
        except ValueError:
            return None
        if tool is None:
            return None
        return {
            "tool_call_id": call.id,
            "tool": call.name,
            "arguments": arguments,
            "digest": digest_of(call.name, arguments),
        }

    async def before_execute(self, context: AgentRunContext, call: ToolCall) -> None:
        """Awaited right before an approved call runs; a no-op here.

        An application that must never run an approved call twice (across a crash)
        records here that the call started.
        """

    async def on_tool_call(
        self,
        context: AgentRunContext,
        call: ToolCall,
        call_next: Callable[[ToolCall], Awaitable[ToolResult]],
    ) -> ToolResult:
        if call.name not in self.tools_needing_approval:
            return await call_next(call)
        verdict = self._verdicts.pop((context.request_id, call.id), None)
        if verdict is not None and (verdict.approved is not None or verdict.expired):
            self._answers[(context.request_id, call.id)] = verdict
        if verdict is None:
            # Never asked: only calls with invalid arguments get here, and the next layer
            # fails them with the validation error. Anything else must not run unapproved.
            agent_tool = context.tools.get(call.name)
            try:
                if agent_tool is not None:
                    agent_tool.validate_arguments(call.arguments)
            except ValueError:
                return await call_next(call)
            raise ApprovalDenied(f"The {call.name} call was not approved; it did not run.")
        if verdict.denial is not None:
            raise ApprovalDenied(verdict.denial)
        if call.arguments != verdict.approved_arguments:
            raise ApprovalDenied(
                f"The {call.name} arguments changed after the user approved them; it did not run."
            )
        await self.before_execute(context, call)
        return await call_next(call)

    async def after_tool(
        self,
        context: AgentRunContext,
        call: ToolCall,
        result: ToolResult,
        error: Exception | None,
    ) -> None:
        if call.name not in self.tools_needing_approval:
            return
        verdict = self._answers.pop((context.request_id, call.id), None)
        if verdict is not None and verdict.expired:
            result.attributes["reply"] = {"kind": "approval", "expired": True}
        elif verdict is not None:
            result.attributes["reply"] = {"kind": "approval", "approved": verdict.approved}

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        await super().on_event(context, event)
        if isinstance(event, PhaseTransitionEvent) and event.current_phase.is_terminal:
            self._forget(context)

    async def on_error(self, context: AgentRunContext, error: Exception) -> None:
        await super().on_error(context, error)
        self._forget(context)

    def _forget(self, context: AgentRunContext) -> None:
        for table in (self._verdicts, self._answers):
            for key in [key for key in table if key[0] == context.request_id]:
                del table[key]


@dataclass(frozen=True, slots=True)
class _Verdict:
    approved_arguments: dict[str, Any] | None = None
    denial: str | None = None
    #: What the user answered (None when the reply said neither).
    approved: bool | None = None
    #: Nobody answered before the deadline.
    expired: bool = False


def _json_safe(arguments: dict[str, Any]) -> dict[str, Any]:
    """Validated arguments may hold non-JSON values (dates, enums): show them as text."""
    return json.loads(json.dumps(arguments, default=str))
