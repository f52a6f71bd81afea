"""Where a chat stands with people, as stored (``Support``), and what a run start refused
in a taken-over chat raises (``TakenOver``).

``begin_run`` reads whether the chat is taken over inside its transaction, from the
statement that locks the chat's row (``agent_app.durable.store.bump_version``): the
takeover writes that row too, so of a run start and a takeover, one comes first and the
other sees it (``agent_app.people``). The history's ``session`` frame carries ``Support``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_app.models import ChatSession, ChatTakeover
from agent_app.protocol.refusals import Busy

__all__ = ["TAKEN_OVER_MESSAGE", "Support", "TakenOver", "iso", "support_of"]

TAKEN_OVER_MESSAGE = "A person from the team is answering in this chat; the assistant is paused"


class TakenOver(Busy):
    """A run may not start: a member of staff has taken the chat over."""

    def __init__(self) -> None:
        super().__init__(None, TAKEN_OVER_MESSAGE)


def iso(moment: Any) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Support:
    """Where a chat stands with people: the ``support`` of its ``session`` frame."""

    needs_human: bool = False
    reason: str = ""
    since: str | None = None
    staff: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "needs_human": self.needs_human,
            "reason": self.reason or None,
            "needs_human_since": self.since,
            "taken_over": self.staff is not None,
            "staff": None if self.staff is None else {"name": self.staff},
        }


def support_of(session_id: str) -> Support:
    """The chat's support state (a chat that is not stored: nothing)."""
    row = (
        ChatSession.objects.filter(pk=session_id)
        .values("needs_human", "handoff_reason", "needs_human_since", "taken_over_at")
        .first()
    )
    if row is None:
        return Support()
    staff = None
    if row["taken_over_at"] is not None:
        takeover = ChatTakeover.objects.filter(session_id=session_id, ended_at=None).first()
        staff = takeover.staff_name if takeover is not None else ""
    return Support(row["needs_human"], row["handoff_reason"], iso(row["needs_human_since"]), staff)
