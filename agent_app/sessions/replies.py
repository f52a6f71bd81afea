"""The reply desk: answers, approvals and steers for a session, live or for a paused run.

A session's ``ReplyDesk`` takes the replies of its sockets. A reply is tried, in this order
(all under the session's lock, so two replies never race):

1. **the run waiting in memory** — ``Agent.emit_external_event`` (then the run's live
   sub-runs: ``agent_app.agents.subruns.offer``); an accepted answer to a
   question or approval is recorded (``waits.mark``) right after the lock is released
   (an approved tool records that it starts before it runs: that record, not this one,
   is what keeps it from ever running twice after a crash);
2. **a stored wait nobody waits for in memory** — its run's process died (the run is
   paused), or a continuation has not reached that call yet. ``waits.claim`` accepts it
   exactly once; the run picks it up when it registers that wait, and if no run is
   active a continuation starts (``ReplyDesk.resume``): a new run, ``kind`` ``resume``, that runs
   the paused run's open calls with every answer known so far and lets the model go on.

A reply for a run another worker runs never reaches the desk: the session forwards it to
that worker first (``agent_app.sessions.follower``). Every accepted reply is announced to
every socket (``reply_accepted``) after the replying socket heard its verdict. A rejected
one says why (``agent_app.protocol.frames.ReplyReason``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from channels.db import database_sync_to_async

from agent_app.agents import subruns
from agent_app.durable import waits
from agent_app.durable.persistence import shielded
from agent_app.durable.runs import AlreadyContinued
from agent_app.models import RunKind, WaitKind, WaitStatus
from agent_app.protocol.frames import ReplyReason, encode_frame
from agent_app.protocol.refusals import Busy
from agent_app.sessions.fanout import Feed
from agent_app.sessions.run import Run
from agent_app.telemetry.waits import replier, wait_ended
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.external import ExternalEvent

__all__ = ["ReplyDesk", "Verdict"]

logger = logging.getLogger(__name__)

#: The extension that takes each kind of stored wait's reply (as ``accepted_by`` says).
_TAKER = {
    WaitKind.ASK_USER: "AskUserExtension",
    WaitKind.APPROVAL: "ConfirmationExtension",
    WaitKind.BROWSER_TOOL: "BrowserToolExtension",
}
#: The extension that takes an MCP server's question (an ``ask_user`` wait of ``source`` mcp).
_MCP_TAKER = "MCPElicitationExtension"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of a reply: who took it, or why nobody did."""

    request_id: str | None
    accepted_by: list[str]
    reason: ReplyReason | None = None
    #: Why, in words, when the reason alone does not say it (``external_event_result.message``).
    detail: str | None = None


Answer = Callable[[Verdict], Awaitable[None]]


async def _tell_replier(answer: Answer, verdict: Verdict) -> None:
    """Send the replier its verdict; a replier that is gone changes nothing of the reply.

    By now the reply may have been taken (a wait claimed, a tool approved): everything
    that follows (``reply_accepted``, the continuation, the audit) must happen whether or
    not the replying socket can still hear about it.
    """
    try:
        await answer(verdict)
    except Exception:
        logger.debug("The replier left before hearing its verdict")


class ReplyHost(Protocol):
    """What the desk needs of its session (``LiveSession``)."""

    session_id: str
    feed: Feed
    agent: Agent | None

    @property
    def run(self) -> Run | None: ...

    @property
    def active_request_id(self) -> str | None: ...

    async def start(
        self, content: str | None, *, kind: str = ..., resumed_from: str | None = ...
    ) -> str: ...


class ReplyDesk:
    """Taking replies for one session (see the module docstring)."""

    def __init__(self, host: ReplyHost) -> None:
        self.host = host

    async def deliver(self, name: str, payload: dict[str, Any], answer: Answer) -> Verdict:
        """Route a client reply to whatever waits for it; tell the replier, then everyone.

        ``answer`` sends the verdict to the replying socket, before any frame the reply
        causes.
        """
        host = self.host
        resume_from: str | None = None
        answered: str | None = None
        async with host.feed.lock:
            run = host.run
            verdict: Verdict | None = None
            if run is not None and run.task is not None and host.agent is not None:
                verdict = self._to_waiting_run(host.agent, run, name, payload)
                if verdict is not None and payload.get("tool_call_id") in run.waits:
                    answered = payload["tool_call_id"]
            claimed = verdict is None
            if verdict is None:
                verdict, resume_from = await self._to_stored_wait(name, payload)
            await _tell_replier(answer, verdict)
            if verdict.accepted_by:
                await self._reply_accepted(verdict.request_id, name, payload)
        if answered is not None:
            # After the lock, so the woken run goes on meanwhile: an approved tool records
            # that it starts (``executing``) before it runs, which is what keeps it from
            # ever running twice; this only keeps the answer for a continuation.
            await shielded(
                database_sync_to_async(waits.mark)(
                    host.session_id, answered, WaitStatus.ANSWERED, payload
                )
            )
        if answered is not None or (verdict.accepted_by and claimed):
            await wait_ended(
                host.session_id,
                payload["tool_call_id"],
                None,
                reply=payload,
                answered_by=replier.get(),
            )
        if resume_from is not None:
            await self.resume(resume_from)
        return verdict

    async def resume(self, paused_request_id: str) -> str | None:
        """Start a run that continues a paused one; None if another run is active."""
        try:
            return await self.host.start(None, kind=RunKind.RESUME, resumed_from=paused_request_id)
        except Busy:
            return None  # that run takes the recorded replies when it reaches them
        except AlreadyContinued:
            return None  # another socket or process continued it first
        except Exception:
            logger.exception("Could not continue the paused request %s", paused_request_id)
            return None

    def _to_waiting_run(
        self, agent: Agent, run: Run, name: str, payload: dict[str, Any]
    ) -> Verdict | None:
        config = AgentRunConfig(session_id=self.host.session_id, request_id=run.request_id)
        event = ExternalEvent(name, payload)
        taken = agent.emit_external_event(event, config=config)
        if not taken:  # a wait of one of the run's sub-runs (``agent_app.agents.subruns``)
            taken = subruns.offer(self.host.session_id, event)
        return Verdict(run.request_id, taken) if taken else None

    async def _to_stored_wait(
        self, name: str, payload: dict[str, Any]
    ) -> tuple[Verdict, str | None]:
        """Claim a stored wait; return the verdict and the paused run to continue, if any."""
        running = self.host.active_request_id
        claim = None
        if name in waits.RESPONSE_EVENTS:
            claim = await shielded(
                database_sync_to_async(waits.claim)(self.host.session_id, name, payload)
            )
        if claim is None or claim.wait is None:
            reason = claim.reason if claim is not None else None
            if reason is None:
                reason = ReplyReason.STALE if running else ReplyReason.NOT_RUNNING
            return Verdict(running, [], reason, claim.detail if claim else None), None
        taker = (
            _MCP_TAKER
            if waits.is_mcp_question(claim.wait.payload)
            else _TAKER[WaitKind(claim.wait.kind)]
        )
        if running is not None:
            return Verdict(running, [taker]), None  # the run takes it when it gets there
        return Verdict(claim.wait.request_id, [taker]), claim.wait.request_id

    async def _reply_accepted(
        self, request_id: str | None, name: str, payload: dict[str, Any]
    ) -> None:
        """Tell every socket a reply was taken (under the lock)."""
        feed = self.host.feed
        seq = await feed.next_seq()
        correlation = payload.get("tool_call_id")
        frame = {
            "type": "reply_accepted",
            "seq": seq,
            "request_id": request_id,
            "name": name,
            "correlation_id": correlation if isinstance(correlation, str) else None,
            "payload": payload,
        }
        await feed.broadcast(seq, encode_frame(frame))
