"""The server's side of the frame protocol: every frame a socket is sent, the error codes
(``ErrorCode``), the reasons a reply is refused (``ReplyReason``), and ``Refusal``, the
one exception type every refusal is (its ``frame()`` is the ``error`` frame it becomes).

``agent_app.protocol.frames`` re-exports all of it: the names are the protocol's, wherever
they are defined.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "AgentEventFrame",
    "BranchSwitchedFrame",
    "BudgetExceededFrame",
    "BudgetFrame",
    "ErrorCode",
    "ErrorFrame",
    "ErrorInfo",
    "ExternalEventResultFrame",
    "FrameError",
    "HistoryPageFrame",
    "OutboundFrame",
    "PongFrame",
    "Refusal",
    "ReplyReason",
    "RunCancelledFrame",
    "RunFailedFrame",
    "RunStartedFrame",
    "SessionFrame",
    "run_started_frame",
]


class ErrorCode(StrEnum):
    """The ``code`` of an ``error`` frame."""

    BAD_JSON = "bad_json"
    BAD_FRAME = "bad_frame"
    UNKNOWN_TYPE = "unknown_type"
    TOO_LARGE = "too_large"
    BUSY = "busy"
    NOT_RUNNING = "not_running"
    FORBIDDEN = "forbidden"
    UNKNOWN_ASSISTANT = "unknown_assistant"
    RATE_LIMITED = "rate_limited"
    BUDGET_EXCEEDED = "budget_exceeded"
    INTERNAL = "internal"


class ReplyReason(StrEnum):
    """Why nobody took a reply: the ``reason`` of an ``external_event_result`` frame."""

    #: No run is active, and no stored wait matches.
    NOT_RUNNING = "not_running"
    #: Not a reply a client may send (``CLIENT_REPLY_NAMES``).
    NOT_ALLOWED = "not_allowed"
    #: A steering payload without non-blank string ``content``.
    INVALID = "invalid"
    #: A steering payload over the content limit.
    TOO_LARGE = "too_large"
    #: The wait's deadline passed.
    EXPIRED = "expired"
    #: Answered already, never asked, or not a reply this wait takes.
    STALE = "stale"
    #: An approval for other arguments than the ones shown.
    MISMATCH = "mismatch"
    #: The server failed to route it.
    INTERNAL = "internal"


class Refusal(Exception):
    """A request the app refuses; ``code`` and ``message`` become an ``error`` frame.

    The one type every refusal is: a frame that is no valid frame (``FrameError``), a
    socket or frame over its budget (``agent_app.guard.limits``), a message while a run
    is active (``agent_app.protocol.refusals.Busy``), a cancel with none (``NotRunning``).
    """

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def frame(self) -> ErrorFrame:
        return ErrorFrame(code=self.code, message=self.message)


class FrameError(Refusal):
    """An inbound frame was refused: it is no valid frame of the protocol."""


# --- server → client -------------------------------------------------------------------


class OutboundFrame(BaseModel):
    """Base of every server → client frame."""

    model_config = ConfigDict(frozen=True)

    def dump(self) -> dict[str, Any]:
        """The JSON-ready dict sent on the socket."""
        return self.model_dump(mode="json")


class SessionFrame(OutboundFrame):
    """Sent once on connect: the newest history, how runs ended, what is running or pending.

    Built as a plain dict by ``agent_app.sessions.live`` (its items come from
    ``agent_app.durable.history``); this model documents the shape and the tests hold the two equal.
    """

    type: Literal["session"] = "session"
    session_id: str
    title: str
    #: The newest stored messages, oldest first (``agent_app.durable.history.history_item``).
    history: list[dict[str, Any]]
    has_more_history: bool
    runs: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    #: Tokens the session's finished runs used: ``input_tokens``, ``output_tokens``,
    #: ``total_tokens``.
    usage: dict[str, int]
    #: Where the chat stands with people (``agent_app.people``): ``needs_human``,
    #: ``reason``, ``needs_human_since``, ``taken_over``, ``staff`` (``{name}`` or None).
    support: dict[str, Any]
    active_request_id: str | None
    last_seq: int


class RunStartedFrame(OutboundFrame):
    """A run started: every socket gets it before the run's first ``agent_event``."""

    type: Literal["run_started"] = "run_started"
    seq: int
    request_id: str
    #: The user's text; None for a continuation of a paused run.
    content: str | None
    kind: str
    resumed_from: str | None
    position: int | None
    #: The stored user message's id (its history item's ``id``), else None.
    message_id: int | None = None
    #: For ``regenerate``/``edit``: where the superseded turn began; pages drop it.
    superseded_from: int | None = None
    created_at: str
    #: References of the message's attachments: ``{id, name, media_type, size, url}``.
    attachments: list[dict[str, Any]] = []
    #: The chat's title now: a new chat is named after its first message (``durable.titles``).
    title: str = ""


def run_started_frame(
    *,
    seq: int,
    request_id: str,
    content: str | None,
    kind: str,
    resumed_from: str | None,
    position: int | None,
    message_id: int | None,
    superseded_from: int | None,
    created_at: str,
    attachments: list[dict[str, Any]],
    title: str,
) -> dict[str, Any]:
    """``RunStartedFrame(...).dump()``, built as a plain dict: sent once a run, where the
    model's validation and dump cost about ten times the dict. The model documents the
    shape; a test holds the two equal."""
    return {
        "type": "run_started",
        "seq": seq,
        "request_id": request_id,
        "content": content,
        "kind": kind,
        "resumed_from": resumed_from,
        "position": position,
        "message_id": message_id,
        "superseded_from": superseded_from,
        "created_at": created_at,
        "attachments": attachments,
        "title": title,
    }


class AgentEventFrame(OutboundFrame):
    """One ``AgentEvent`` of a request, numbered per session (sent via ``agent_event_frame``)."""

    type: Literal["agent_event"] = "agent_event"
    seq: int
    request_id: str
    event: dict[str, Any]


class ErrorInfo(BaseModel):
    type: str
    message: str


class RunFailedFrame(OutboundFrame):
    """The request failed: a model, hook or configuration error (a message for people)."""

    type: Literal["run_failed"] = "run_failed"
    seq: int
    request_id: str
    error: ErrorInfo


class RunCancelledFrame(OutboundFrame):
    """The request was cancelled by a ``cancel`` frame."""

    type: Literal["run_cancelled"] = "run_cancelled"
    seq: int
    request_id: str


class BranchSwitchedFrame(OutboundFrame):
    """Every socket's news of a new shown path: a switch, a new version (``edit``,
    ``regenerate``). ``messages``: the path from ``position`` on (its newest part if it is
    long: ``has_more`` then says the rest is read with ``history_before``)."""

    type: Literal["branch_switched"] = "branch_switched"
    seq: int
    position: int
    index: int
    messages: list[dict[str, Any]]
    #: The runs of ``messages`` (as ``history_page`` lists them).
    runs: list[dict[str, Any]] = []
    has_more: bool


class HistoryPageFrame(OutboundFrame):
    """The answer to ``history_before``."""

    type: Literal["history_page"] = "history_page"
    messages: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    has_more: bool


class ExternalEventResultFrame(OutboundFrame):
    """The answer to every ``external_event`` (and ``steer``) frame."""

    type: Literal["external_event_result"] = "external_event_result"
    name: str
    correlation_id: str | None
    #: Names of the extensions that claimed the event; ``[]`` means rejected.
    accepted_by: list[str]
    #: Why nobody took it; None when accepted.
    reason: ReplyReason | None = None
    #: The same in words, when the reason alone does not say it (an ``invalid`` answer to
    #: an MCP server's question); the key is left out otherwise.
    message: str | None = None

    def dump(self) -> dict[str, Any]:
        data = super().dump()
        if data["message"] is None:
            del data["message"]
        return data


class ErrorFrame(OutboundFrame):
    """A refused frame; the connection stays open."""

    type: Literal["error"] = "error"
    code: ErrorCode
    message: str


class BudgetExceededFrame(ErrorFrame):
    """``error`` ``budget_exceeded``: the person's daily token budget is used up
    (``agent_app.budgets``); ``resets_at`` says when it is whole again."""

    code: ErrorCode = ErrorCode.BUDGET_EXCEEDED
    resets_at: str
    limit: int
    used: int


class BudgetFrame(OutboundFrame):
    """The person's token budget of today, sent on connect when one applies."""

    type: Literal["budget"] = "budget"
    limit: int
    used: int
    remaining: int
    resets_at: str


class PongFrame(OutboundFrame):
    type: Literal["pong"] = "pong"
