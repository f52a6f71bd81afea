"""The entry points every client of a chat shares: a socket, an HTTP stream, a program.

A run start and a reply must be treated the same whoever sends them, so both clients — the
chat socket (``agent_app.consumers``) and the AG-UI endpoints (``agent_app.api.agui``) —
go through here:

- ``start_run``: a run starts within the person's token budget (``agent_app.budgets``:
  refused with ``BudgetExceeded`` before any model call); a session that runs a run here
  is ``Busy`` at once, before the budget is asked (which may wait for calls in flight),
  as ``LiveSession.start`` would be; ``start`` still decides.
- ``audited_reply``: the audit row is written before the reply can act, the live session
  routes it to whatever waits for it (here, another worker, or a stored wait: exactly
  once, checked against the digest and the deadline, ``agent_app.sessions.replies``), and
  the verdict is recorded after; the wait's span names who answered
  (``agent_app.telemetry.waits.replier``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_app.budgets import admit_run
from agent_app.durable.audit import record_reply, record_verdict
from agent_app.guard.access import Person
from agent_app.protocol.refusals import Busy
from agent_app.sessions.live import LiveSession
from agent_app.sessions.replies import Verdict
from agent_app.telemetry.waits import person_label, replier

__all__ = ["audited_reply", "start_run"]


async def start_run(
    live: LiveSession, person: Person | None, content: str | None, *args: Any, **kwargs: Any
) -> str:
    """Start a run (``LiveSession.start``) within ``person``'s token budget; its id."""
    if live.run is not None:
        raise Busy(live.run.request_id)
    async with admit_run(person, live.session_id):
        return await live.start(content, *args, **kwargs)


async def audited_reply(
    live: LiveSession,
    name: str,
    payload: dict[str, Any],
    answer: Callable[[Verdict], Awaitable[None]],
    user: Any = None,
) -> Verdict | None:
    """Record, deliver and audit one reply of ``user``; None when it could not be
    recorded (and so was not delivered). ``answer`` hears the verdict before any frame
    the reply causes."""
    record = await record_reply(live.session_id, live.active_request_id, name, payload)
    if record is None:
        return None
    replier.set(person_label(user))  # the wait span's answered_by
    verdict = await live.deliver(name, payload, answer)
    await record_verdict(record, verdict.request_id, verdict.accepted_by)
    return verdict
