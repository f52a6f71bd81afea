"""The outbound frames of people in the loop (``agent_app.people``); docs/protocol.md.

The inbound ones (``feedback``, ``request_human``, ``takeover``, ``staff_message``,
``hand_back``) are parsed with the others in ``agent_app.protocol.frames``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from agent_app.protocol.frames import OutboundFrame

__all__ = [
    "CustomerMessageFrame",
    "FeedbackSavedFrame",
    "HandedBackFrame",
    "HandoffRequestedFrame",
    "StaffInfo",
    "StaffMessageOutFrame",
    "TakenOverFrame",
]


class StaffInfo(BaseModel):
    """Who of the team answers: the name the customer sees."""

    name: str


class HandoffRequestedFrame(OutboundFrame):
    """Someone asked for a person (the customer, or the assistant's ``handoff_to_human``)."""

    type: Literal["handoff_requested"] = "handoff_requested"
    seq: int
    reason: str | None = None
    #: ``customer`` or ``assistant``.
    source: str = "customer"
    #: When people answer (``ZETT_SUPPORT_HOURS``), in words; None: no hours are set.
    hours: str | None = None


class TakenOverFrame(OutboundFrame):
    """A member of staff answers in the chat now; no run starts until ``handed_back``."""

    type: Literal["taken_over"] = "taken_over"
    seq: int
    staff: StaffInfo


class StaffMessageOutFrame(OutboundFrame):
    """What a member of staff wrote, as stored (``id``: the message's)."""

    type: Literal["staff_message"] = "staff_message"
    seq: int
    content: str
    staff: StaffInfo
    position: int
    id: int
    created_at: str


class CustomerMessageFrame(OutboundFrame):
    """A message the customer sent while the chat was taken over: stored, no run."""

    type: Literal["customer_message"] = "customer_message"
    seq: int
    content: str
    position: int
    id: int
    created_at: str
    #: References of the message's files, as in ``run_started``.
    attachments: list[dict[str, Any]] = []


class HandedBackFrame(OutboundFrame):
    """The assistant answers the chat again."""

    type: Literal["handed_back"] = "handed_back"
    seq: int


class FeedbackSavedFrame(OutboundFrame):
    """The answer to ``feedback``: the rating as stored (sent to the rating socket)."""

    type: Literal["feedback_saved"] = "feedback_saved"
    message_id: int
    rating: str
    comment: str
    updated_at: str | None
