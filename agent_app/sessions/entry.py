"""The entry points every client of a chat shares: a socket, an HTTP stream, a program.

A reply (an answer, an approval, a steer) must be treated the same whoever sends it: the
audit row is written before the reply can act, the live session routes it to whatever
waits for it (here, another worker, or a stored wait: exactly once, checked against the
digest and the deadline, ``agent_app.sessions.replies``), and the verdict is recorded
after. ``audited_reply`` is that path, used by the chat socket
(``agent_app.consumers``) and by the AG-UI ``resume`` (``agent_app.api.agui``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_app.durable.audit import record_reply, record_verdict
from agent_app.sessions.live import LiveSession
from agent_app.sessions.replies import Verdict

__all__ = ["audited_reply"]


async def audited_reply(
    live: LiveSession,
    name: str,
    payload: dict[str, Any],
    answer: Callable[[Verdict], Awaitable[None]],
) -> Verdict | None:
    """Record, deliver and audit one reply; None when it could not be recorded (and so
    was not delivered). ``answer`` hears the verdict before any frame the reply causes."""
    record = await record_reply(live.session_id, live.active_request_id, name, payload)
    if record is None:
        return None
    verdict = await live.deliver(name, payload, answer)
    await record_verdict(record, verdict.request_id, verdict.accepted_by)
    return verdict
