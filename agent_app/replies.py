"""Replies to a session: answers, approvals and steers, live or for a paused run.

``ReplyHandling`` is the part of ``agent_app.live.LiveSession`` that takes replies. A reply
is tried, in this order (all under the session's lock, so two replies never race):

1. **the run waiting in memory** — ``Agent.emit_external_event``; an accepted answer to a
   question or approval is recorded (``waits.mark``) right after the lock is released
   (an approved tool records that it starts before it runs: that record, not this one,
   is what keeps it from ever running twice after a crash);
2. **a stored wait nobody waits for in memory** — its run's process died (the run is
   paused), or a continuation has not reached that call yet. ``waits.claim`` accepts it
   exactly once; the run picks it up when it registers that wait, and if no run is
   active a continuation starts (``resume``): a new run, ``kind`` ``resume``, that runs
   the paused run's open calls with every answer known so far and lets the model go on.

Every accepted reply is announced to every socket (``reply_accepted``) after the replying
socket heard its verdict. A rejected one says why (``reason``): ``not_running``,
``expired``, ``mismatch`` (an approval for other arguments than shown) or ``stale``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app import waits
from agent_app.models import RunKind, WaitKind, WaitStatus
from agent_app.persistence import settle
from agent_app.protocol import encode_frame
from agent_app.runs import AlreadyContinued
from zett_agent.agent import AgentRunConfig
from zett_agent.extensions.external import ExternalEvent

if TYPE_CHECKING:
    from agent_app.live import LiveSession, _Run

__all__ = ["ReplyHandling", "Verdict"]

logger = logging.getLogger(__name__)

#: The extension that takes each kind of stored wait's reply (as ``accepted_by`` says).
_TAKER = {WaitKind.ASK_USER: "AskUserExtension", WaitKind.APPROVAL: "ConfirmationExtension"}


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of a reply: who took it, or why nobody did."""

    request_id: str | None
    accepted_by: list[str]
    reason: str | None = None


async def _tell_replier(answer: Callable[[Verdict], Awaitable[None]], verdict: Verdict) -> None:
    """Send the replier its verdict; a replier that is gone changes nothing of the reply.

    By now the reply may have been taken (a wait claimed, a tool approved): everything
    that follows (``reply_accepted``, the continuation, the audit) must happen whether or
    not the replying socket can still hear about it.
    """
    try:
        await answer(verdict)
    except Exception:
        logger.debug("The replier left before hearing its verdict")


class ReplyHandling:
    """Taking replies (a mixin of ``LiveSession``; see the module docstring)."""

    async def deliver(
        self: LiveSession,
        name: str,
        payload: dict[str, Any],
        answer: Callable[[Verdict], Awaitable[None]],
        *,
        forwarded: bool = False,
    ) -> Verdict:
        """Route a client reply to whatever waits for it; tell the replier, then everyone.

        ``answer`` sends the verdict to the replying socket, before any frame the reply
        causes. Without a run here, a reply for a run another worker runs is forwarded to
        it (unless it was ``forwarded`` from there already).
        """
        if self._run is None and self.cluster is not None and not forwarded:
            verdict = await self._forward_reply(name, payload, answer)
            if verdict is not None:
                return verdict
        resume_from: str | None = None
        answered: str | None = None
        async with self._lock:
            run = self._run
            verdict: Verdict | None = None
            if run is not None and run.task is not None and self.agent is not None:
                verdict = self._to_waiting_run(run, name, payload)
                if verdict is not None and payload.get("tool_call_id") in run.waits:
                    answered = payload["tool_call_id"]
            if verdict is None:
                verdict, resume_from = await self._to_stored_wait(name, payload)
            await _tell_replier(answer, verdict)
            if verdict.accepted_by:
                await self._reply_accepted(verdict.request_id, name, payload)
        if answered is not None:
            # After the lock, so the woken run goes on meanwhile: an approved tool records
            # that it starts (``executing``) before it runs, which is what keeps it from
            # ever running twice; this only keeps the answer for a continuation.
            await settle(
                database_sync_to_async(waits.mark)(
                    self.session_id, answered, WaitStatus.ANSWERED, payload
                )
            )
        if resume_from is not None:
            await self.resume(resume_from)
        return verdict

    def _to_waiting_run(
        self: LiveSession, run: _Run, name: str, payload: dict[str, Any]
    ) -> Verdict | None:
        assert self.agent is not None
        config = AgentRunConfig(session_id=self.session_id, request_id=run.request_id)
        taken = self.agent.emit_external_event(ExternalEvent(name, payload), config=config)
        return Verdict(run.request_id, taken) if taken else None

    async def _to_stored_wait(
        self: LiveSession, name: str, payload: dict[str, Any]
    ) -> tuple[Verdict, str | None]:
        """Claim a stored wait; return the verdict and the paused run to continue, if any."""
        running = self.active_request_id
        claim = None
        if name in waits.RESPONSE_EVENTS:
            claim = await settle(
                database_sync_to_async(waits.claim)(self.session_id, name, payload)
            )
        if claim is None or claim.wait is None:
            reason = claim.reason if claim is not None else "unknown"
            if reason == "unknown":
                reason = "stale" if running else "not_running"
            return Verdict(running, [], reason), None
        taker = _TAKER[WaitKind(claim.wait.kind)]
        if running is not None:
            return Verdict(running, [taker]), None  # the run takes it when it gets there
        return Verdict(claim.wait.request_id, [taker]), claim.wait.request_id

    async def _reply_accepted(
        self: LiveSession, request_id: str | None, name: str, payload: dict[str, Any]
    ) -> None:
        """Tell every socket a reply was taken (under the lock)."""
        seq = await self.next_seq()
        correlation = payload.get("tool_call_id")
        frame = {
            "type": "reply_accepted",
            "seq": seq,
            "request_id": request_id,
            "name": name,
            "correlation_id": correlation if isinstance(correlation, str) else None,
            "payload": payload,
        }
        await self._broadcast(seq, encode_frame(frame))

    # --- waits of the running run ------------------------------------------------------

    async def _custom(self: LiveSession, run: _Run, event: dict[str, Any]) -> None:
        """Broadcast a ``custom`` event; store the wait it announces first (write-ahead)."""
        payload = event.get("payload")
        kind = waits.wait_kind(event.get("name"), payload)
        known = None
        if kind is not None:
            assert isinstance(payload, dict)
            run.waits.add(payload["tool_call_id"])
            known = await settle(
                database_sync_to_async(waits.record_wait)(
                    self.session_id, run.request_id, event["name"], payload
                )
            )
        await self.broadcast_event(run.request_id, event)
        run.waiting = kind is not None
        if known is not None and self.agent is not None and isinstance(payload, dict):
            # Answered while nobody was waiting for it: hand it over now.
            config = AgentRunConfig(session_id=self.session_id, request_id=run.request_id)
            self.agent.emit_external_event(
                ExternalEvent(str(payload["response_event"]), known), config=config
            )

    async def _close_waits(self: LiveSession, run: _Run, event: dict[str, Any]) -> None:
        """A call with a stored wait got its result: the wait is done (or expired)."""
        message = event.get("message") or {}
        reply = (message.get("attributes") or {}).get("reply") or {}
        status = WaitStatus.EXPIRED if reply.get("expired") else WaitStatus.DONE
        for call in event.get("tool_calls") or ():
            call_id = call.get("id")
            if call_id in run.waits:
                run.waits.discard(call_id)
                await settle(database_sync_to_async(waits.mark)(self.session_id, call_id, status))

    # --- continuing a paused run -------------------------------------------------------

    async def resume(self: LiveSession, paused_request_id: str) -> str | None:
        """Start a run that continues a paused one; None if another run is active."""
        from agent_app.live import Busy

        try:
            return await self.start(None, kind=RunKind.RESUME, resumed_from=paused_request_id)
        except Busy:
            return None  # that run takes the recorded replies when it reaches them
        except AlreadyContinued:
            return None  # another socket or process continued it first
        except Exception:
            logger.exception("Could not continue the paused request %s", paused_request_id)
            return None

    async def _resumption(self: LiveSession) -> tuple[list[ExternalEvent], dict[str, Any]]:
        """The known replies and the deadlines of the open calls a continuation runs."""
        replies, deadlines = await database_sync_to_async(waits.resumption)(self.session_id)
        return [ExternalEvent(name, payload) for name, payload in replies], deadlines
