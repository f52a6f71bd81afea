"""The socket's frames that answer the running request: ``external_event``, ``steer``
and ``cancel`` (mixed into ``ChatConsumer``).

A reply is checked (only the names a client may send), recorded in the audit before it
is acted on (``agent_app.sessions.entry.audited_reply``), then handed to the run; the
client is told who took it in an ``external_event_result``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app.assistants import registry
from agent_app.models import ChatSession
from agent_app.protocol.frames import (
    CLIENT_REPLY_NAMES,
    STEERING_EVENT,
    ErrorCode,
    ExternalEventFrame,
    ExternalEventResultFrame,
    OutboundFrame,
    ReplyReason,
    SteerFrame,
    steering_refusal,
)
from agent_app.protocol.refusals import NotRunning
from agent_app.sessions.entry import audited_reply
from agent_app.sessions.live import LiveSession
from agent_app.sessions.replies import Verdict

__all__ = ["ReplyFrames"]


class ReplyFrames:
    """Mixed into ``ChatConsumer``: replies, steering and cancelling."""

    live: LiveSession | None
    session_id: str
    scope: Any
    #: The session's row exists (``TurnFrames``).
    _stored: bool

    if TYPE_CHECKING:

        async def send_frame(self, frame: OutboundFrame) -> None: ...
        async def _error(self, code: ErrorCode, message: str) -> None: ...

    async def on_external_event(self, frame: ExternalEventFrame) -> None:
        await self._deliver(frame.name, frame.payload)

    async def on_steer(self, frame: SteerFrame) -> None:
        # Sugar for the steering_message external event: answered the same way, with an
        # external_event_result (``reason: "not_running"`` when nothing runs).
        await self._deliver(STEERING_EVENT, {"content": frame.content})

    async def on_cancel(self) -> None:
        assert self.live is not None
        try:
            await self.live.cancel()
        except NotRunning as refusal:
            await self._error(refusal.code, refusal.message)

    async def _deliver(self, name: str, payload: dict[str, Any]) -> None:
        """Check, record, then hand a reply to the running request; tell the client who took it."""
        assert self.live is not None
        correlation = payload.get("tool_call_id")
        correlation_id = correlation if isinstance(correlation, str) else None

        def result(
            accepted_by: list[str], reason: ReplyReason | None, message: str | None = None
        ) -> ExternalEventResultFrame:
            return ExternalEventResultFrame(
                name=name,
                correlation_id=correlation_id,
                accepted_by=accepted_by,
                reason=reason,
                message=message,
            )

        if name not in CLIENT_REPLY_NAMES and name not in registry.reply_names():
            await self.send_frame(result([], ReplyReason.NOT_ALLOWED))
            return
        if name == STEERING_EVENT and (refusal := steering_refusal(payload)) is not None:
            await self.send_frame(result([], refusal))
            return
        if not self._stored:
            stored = ChatSession.objects.filter(pk=self.session_id).exists
            if not await database_sync_to_async(stored)():
                await self.send_frame(result([], "not_running"))  # an empty chat: nothing waits
                return
            self._stored = True

        async def answer(verdict: Verdict) -> None:
            await self.send_frame(result(verdict.accepted_by, verdict.reason, verdict.detail))

        # The audit row comes first (``audited_reply``): a reply that cannot be recorded is
        # not acted on. With no run active it may still answer a paused run's stored question.
        if await audited_reply(self.live, name, payload, answer, self.scope.get("user")) is None:
            await self._error(
                ErrorCode.INTERNAL, "The reply could not be recorded, so it was not delivered"
            )
            await self.send_frame(result([], ReplyReason.INTERNAL))
