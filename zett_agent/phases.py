"""The phase machine of one request: ``AgentPhase`` and its legal moves.

Below the event modules: ``AgentEvent`` (``zett_agent.events``) and the extension events
(``zett_agent.extensions.events``) both carry phases, and ``zett_agent.events`` re-exports
both names.
"""

from __future__ import annotations

from enum import StrEnum

from zett_agent.exceptions import AgentProtocolError

__all__ = ["AgentPhase", "check_transition"]


class AgentPhase(StrEnum):
    """The exclusive phase of one request.

    ::

        CREATED → LOADING_CONTEXT → READY ⇄ GENERATING
                                          ⇄ RUNNING_TOOL
                                          ⇄ COMPACTING
                                    READY → COMPLETED
        any active phase → FAILED | CANCELLED
    """

    CREATED = "created"
    LOADING_CONTEXT = "loading_context"
    READY = "ready"
    COMPACTING = "compacting"
    GENERATING = "generating"
    RUNNING_TOOL = "running_tool"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_active(self) -> bool:
        """True while the request is between its start and a terminal phase."""
        return self in _ACTIVE_PHASES

    @property
    def is_terminal(self) -> bool:
        """True for COMPLETED, FAILED and CANCELLED."""
        return self in _TERMINAL_PHASES


_ACTIVE_PHASES = frozenset(
    {
        AgentPhase.LOADING_CONTEXT,
        AgentPhase.READY,
        AgentPhase.COMPACTING,
        AgentPhase.GENERATING,
        AgentPhase.RUNNING_TOOL,
    }
)
_TERMINAL_PHASES = frozenset({AgentPhase.COMPLETED, AgentPhase.FAILED, AgentPhase.CANCELLED})

_LEGAL_MOVES: dict[AgentPhase, frozenset[AgentPhase]] = {
    AgentPhase.CREATED: frozenset({AgentPhase.LOADING_CONTEXT}),
    AgentPhase.LOADING_CONTEXT: frozenset({AgentPhase.READY}),
    AgentPhase.READY: frozenset(
        {
            AgentPhase.COMPACTING,
            AgentPhase.GENERATING,
            AgentPhase.RUNNING_TOOL,
            AgentPhase.COMPLETED,
        }
    ),
    AgentPhase.COMPACTING: frozenset({AgentPhase.READY}),
    AgentPhase.GENERATING: frozenset({AgentPhase.READY}),
    AgentPhase.RUNNING_TOOL: frozenset({AgentPhase.READY}),
    AgentPhase.COMPLETED: frozenset(),
    AgentPhase.FAILED: frozenset(),
    AgentPhase.CANCELLED: frozenset(),
}
for _phase in _ACTIVE_PHASES:
    _LEGAL_MOVES[_phase] = _LEGAL_MOVES[_phase] | {AgentPhase.FAILED, AgentPhase.CANCELLED}


def check_transition(current: AgentPhase, target: AgentPhase) -> None:
    """Raise ``AgentProtocolError`` unless ``current → target`` is a legal move."""
    if target not in _LEGAL_MOVES[current]:
        raise AgentProtocolError(
            f"Invalid agent phase transition: {current.value} -> {target.value}; "
            f"from {current.value} the legal moves are "
            f"{sorted(p.value for p in _LEGAL_MOVES[current]) or 'none'}"
        )
