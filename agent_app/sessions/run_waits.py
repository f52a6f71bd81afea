"""A run's waits: a question, approval or host-page tool announced by the agent is stored
before its frame goes out (write-ahead), and marked done or expired when its call gets a
result (mixed into ``agent_app.sessions.run.Run``).

A reply that arrived while nobody waited (stored already) is handed to the agent as soon
as the wait is announced; a continuation reads the known replies and open deadlines back
(``_resumption``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app.agents import subruns
from agent_app.durable import waits
from agent_app.durable.persistence import shielded
from agent_app.models import WaitStatus
from agent_app.sessions.run_state import RunOwner, RunState
from agent_app.telemetry.waits import wait_ended
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.external import ExternalEvent

__all__ = ["RunWaits"]


class RunWaits:
    """Mixed into ``Run``: storing the waits it announces and closing them."""

    owner: RunOwner
    request_id: str
    #: Calls of this run with a stored wait (marked done when their result lands).
    waits: set[str]
    agent: Agent | None
    trace_context: str

    if TYPE_CHECKING:

        def to(self, state: RunState) -> None: ...

    async def _custom(self, event: dict[str, Any]) -> None:
        """Broadcast a ``custom`` event; store the wait it announces first (write-ahead)."""
        session_id = self.owner.session_id
        payload = event.get("payload")
        kind = waits.wait_kind(event.get("name"), payload)
        known = None
        if kind is not None:
            assert isinstance(payload, dict)
            self.waits.add(payload["tool_call_id"])
            known = await shielded(
                database_sync_to_async(waits.record_wait)(
                    session_id,
                    self.request_id,
                    event["name"],
                    payload,
                    trace_context=self.trace_context,
                )
            )
        await self.owner.feed.broadcast_event(self.request_id, event)
        if kind is not None:
            self.to(RunState.WAITING)
        if known is not None and self.agent is not None and isinstance(payload, dict):
            # Answered while nobody was waiting for it: hand it over now.
            config = AgentRunConfig(session_id=session_id, request_id=self.request_id)
            reply = ExternalEvent(str(payload["response_event"]), known)
            if not self.agent.emit_external_event(reply, config=config):
                subruns.offer(session_id, reply)  # a sub-run's wait

    async def _close_waits(self, event: dict[str, Any]) -> None:
        """A call with a stored wait got its result: the wait is done (or expired)."""
        message = event.get("message") or {}
        attributes = message.get("attributes") or {}
        reply = attributes.get("reply") or attributes.get("browser_tool") or {}
        status = WaitStatus.EXPIRED if reply.get("expired") else WaitStatus.DONE
        for call in event.get("tool_calls") or ():
            call_id = call.get("id")
            if call_id in self.waits:
                self.waits.discard(call_id)
                await shielded(
                    database_sync_to_async(waits.mark)(self.owner.session_id, call_id, status)
                )
                if status == WaitStatus.EXPIRED:
                    await wait_ended(self.owner.session_id, call_id, "expired")

    async def _resumption(self) -> tuple[list[ExternalEvent], dict[str, Any]]:
        """The known replies and the deadlines of the open calls a continuation runs."""
        replies, deadlines = await database_sync_to_async(waits.resumption)(self.owner.session_id)
        return [ExternalEvent(name, payload) for name, payload in replies], deadlines
