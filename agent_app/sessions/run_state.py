"""A run's states and what it needs of its session (``agent_app.sessions.run``).

The transitions a run may make are ``TRANSITIONS``; ``Run.to`` refuses any other.
"""

from __future__ import annotations

import enum
from typing import Any, Protocol

from agent_app.bus.base import SessionBus
from agent_app.sessions.fanout import Feed
from zett_agent.agent import Agent

__all__ = ["TRANSITIONS", "RunOwner", "RunState", "StopReason"]


class RunState(enum.Enum):
    """Where a run is in its life (the transitions are drawn in ``agent_app.sessions.run``)."""

    STARTING = "starting"
    RUNNING = "running"
    WAITING = "waiting"
    ENDING = "ending"
    ENDED = "ended"


class StopReason(enum.Enum):
    """Why a run was stopped from outside, when it was (it ends ``interrupted``)."""

    #: Another worker took over its lease (this one failed to renew it).
    LEASE_LOST = "lease_lost"
    #: This process shuts down (``agent_app.process.shutdown``).
    SHUTDOWN = "shutdown"
    #: This process shuts down and hands the run over: nothing more of it is stored, its
    #: end is not recorded, its lease is let go, and another worker (or the next process)
    #: continues it from its checkpoint (``agent_app.durable.continuation``).
    HANDOVER = "handover"


TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.STARTING: frozenset({RunState.RUNNING, RunState.ENDING}),
    RunState.RUNNING: frozenset({RunState.WAITING, RunState.ENDING}),
    RunState.WAITING: frozenset({RunState.RUNNING, RunState.ENDING}),
    RunState.ENDING: frozenset({RunState.ENDED}),
    RunState.ENDED: frozenset(),
}


class RunOwner(Protocol):
    """What a run needs of the session it belongs to (``LiveSession``)."""

    session_id: str
    feed: Feed
    bus: SessionBus
    #: The chat's agent once built (``get_agent``); None: built at the next ``get_agent``.
    agent: Agent | None

    async def get_agent(self) -> Agent: ...

    def run_ended(self, run: Any) -> None:
        """Called under the lock once ``run``'s end is stored: the session is free."""

    def check_idle(self) -> None:
        """Called after the run's last frame: the session may be dropped."""
