"""The frame protocol of ``/ws/sessions/<uuid>/`` (docs/protocol.md says it in prose).

Every frame is one JSON object with a ``type``. ``parse_frame`` turns raw socket text into
one of the inbound models or raises ``FrameError`` carrying the error code to send back;
checks run from the cheapest to the most specific, so each bad frame gets the code that
names its first problem: size, JSON syntax, shape, type, fields, content size. Outbound
frames are models too, dumped with ``frame.dump()``, so the wire format lives in one file.
The one exception is the hot path: a request sends an ``agent_event`` per streamed delta,
so ``agent_event_frame`` builds that frame as a plain dict (the event is already JSON-safe,
``zett_agent.serialization.event_to_dict``); ``AgentEventFrame`` documents the same shape
and the tests hold the two equal. ``encode_frame`` turns any frame into the socket's text;
it and the 512 KiB rule of outbound frames live in ``agent_app.protocol.text`` (re-exported).

Hostile input (docs/security.md): ``parse_frame`` never raises anything but ``FrameError``.
Before any field is looked at, the decoded JSON is walked once, without recursion, and
refused if it nests deeper than ``MAX_DEPTH``, holds a number that is not finite or does not
fit 64 bits, or holds text (keys included) with NUL or an unpaired surrogate: PostgreSQL
refuses both in ``jsonb`` and ``text``, SQLite's ``JSON_VALID`` refuses NaN, and nothing
holding them could be stored, audited or echoed. ``encode_frame`` cannot fail either: a lone
surrogate from anywhere (a tool's output, a model) leaves as a ``\\u`` escape, and values that
are not JSON are replaced, so the socket's UTF-8 encode never sees anything it cannot write.
"""

from __future__ import annotations

import json
import math
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from agent_app.protocol.text import (
    MAX_OUTBOUND_BYTES,
    TOOL_RESULT_KEEP,
    agent_event_frame,
    encode_delta_frame,
    encode_frame,
    fit_event,
)

__all__ = [
    "CLIENT_REPLY_NAMES",
    "MAX_ATTACHMENTS",
    "MAX_CONTENT_BYTES",
    "MAX_DEPTH",
    "MAX_FRAME_BYTES",
    "MAX_OUTBOUND_BYTES",
    "STAFF_FRAMES",
    "STEERING_EVENT",
    "TOOL_RESULT_KEEP",
    "AgentEventFrame",
    "BranchSwitchedFrame",
    "BudgetExceededFrame",
    "BudgetFrame",
    "CancelFrame",
    "EditFrame",
    "EditLastFrame",
    "ErrorCode",
    "ErrorFrame",
    "ExternalEventFrame",
    "ExternalEventResultFrame",
    "FeedbackFrame",
    "FrameError",
    "HandBackFrame",
    "HistoryBeforeFrame",
    "HistoryPageFrame",
    "InboundFrame",
    "OutboundFrame",
    "PingFrame",
    "PongFrame",
    "RegenerateFrame",
    "RequestHumanFrame",
    "RunCancelledFrame",
    "RunFailedFrame",
    "RunStartedFrame",
    "SessionFrame",
    "StaffMessageFrame",
    "SteerFrame",
    "SwitchVersionFrame",
    "TakeoverFrame",
    "UserMessageFrame",
    "agent_event_frame",
    "encode_delta_frame",
    "encode_frame",
    "fit_event",
    "parse_frame",
    "steering_refusal",
]

#: Largest user text (``user_message`` / ``steer`` content), in UTF-8 bytes.
MAX_CONTENT_BYTES = 32 * 1024
#: Most attachment ids one ``user_message`` may name (``ZETT_ATTACHMENTS_PER_MESSAGE`` may
#: lower it).
MAX_ATTACHMENTS = 20
#: Largest inbound frame, in UTF-8 bytes.
MAX_FRAME_BYTES = 256 * 1024
#: Deepest nesting of arrays and objects in an inbound frame (the frame object is level 1).
MAX_DEPTH = 32
#: Integers an inbound frame may hold: what a 64-bit database column or JSON reader takes.
_INT_RANGE = (-(2**63), 2**63 - 1)
#: The external event a ``steer`` frame stands for.
STEERING_EVENT = "steering_message"
#: The replies a client may send (``external_event`` names): the ones the app's extensions
#: declare as answered by the user. Any other name (``internal_message``: an instruction
#: from the application itself) is refused with reason ``not_allowed``, unless an assistant
#: declares it (``Assistant.reply_names``) or ``ZETT_CLIENT_REPLY_NAMES`` lists it.
CLIENT_REPLY_NAMES = frozenset(
    {
        "ask_user_response",
        "approval_response",
        "mcp_elicitation_response",
        "browser_tool_result",
        STEERING_EVENT,
    }
)


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
    is active (``agent_app.sessions.errors.Busy``), a cancel with none (``NotRunning``).
    """

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def frame(self) -> ErrorFrame:
        return ErrorFrame(code=self.code, message=self.message)


class FrameError(Refusal):
    """An inbound frame was refused: it is no valid frame of the protocol."""


# --- client → server -------------------------------------------------------------------


def _non_blank(text: str) -> str:
    # str.strip's idea of blank (which also strips the separators U+001C-U+001F), the one
    # the runtime and the database checks use, not the regex engine's.
    if not text.strip():
        raise PydanticCustomError("blank", "cannot be blank")
    return text


NonBlank = Annotated[str, AfterValidator(_non_blank)]


class _Inbound(BaseModel):
    # Unknown keys are ignored so that a newer client stays compatible with this server.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class UserMessageFrame(_Inbound):
    """Start a request with this text."""

    type: Literal["user_message"]
    content: NonBlank
    #: The assistant a new chat talks to (``agent_app.assistants``); ignored once stored.
    assistant: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    #: Ids of files uploaded to this chat (``POST .../attachments/``), sent with the text.
    attachments: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=64)]],
        Field(max_length=MAX_ATTACHMENTS),
    ] = []


class ExternalEventFrame(_Inbound):
    """Deliver a reply (ask-user answer, approval …) to the running request."""

    type: Literal["external_event"]
    name: NonBlank
    payload: dict[str, Any]


class SteerFrame(_Inbound):
    """Redirect the running request with new user text."""

    type: Literal["steer"]
    content: NonBlank


class CancelFrame(_Inbound):
    """Cancel the running request."""

    type: Literal["cancel"]


class PingFrame(_Inbound):
    """Ask for a ``pong`` (keep-alive, latency check)."""

    type: Literal["ping"]


#: A message's place on the chat's shown path (``position`` of a history item).
Position = Annotated[int, Field(ge=0, le=2**31)]


class RegenerateFrame(_Inbound):
    """Answer a turn again: a new version of the turn whose user message is at
    ``position`` (default: the last turn); the old version is kept."""

    type: Literal["regenerate"]
    position: Position | None = None


class EditLastFrame(_Inbound):
    """Replace the last user message with ``content`` and answer that instead."""

    type: Literal["edit_last"]
    content: NonBlank


class EditFrame(_Inbound):
    """A new version of the turn whose user message is at ``position``, with ``content``
    as that message; the old version is kept."""

    type: Literal["edit"]
    position: Position
    content: NonBlank


class SwitchVersionFrame(_Inbound):
    """Show version ``index`` (1-based) of the turn whose user message is at ``position``."""

    type: Literal["switch_version"]
    position: Position
    index: Annotated[int, Field(ge=1, le=2**31)]


#: Most messages one ``history_before`` may ask for.
MAX_HISTORY_LIMIT = 100


class HistoryBeforeFrame(_Inbound):
    """Ask for the stored messages before ``position`` (older history, page by page)."""

    type: Literal["history_before"]
    position: Annotated[int, Field(ge=0, le=2**31)]
    limit: Annotated[int, Field(ge=1, le=MAX_HISTORY_LIMIT)] = 50


class FeedbackFrame(_Inbound):
    """Rate an answer 👍/👎 (again: the rating changes). The answer is named by its
    ``message_id`` (a history item's ``id``), or, for an answer just streamed whose id the
    page has not seen, by its run's ``request_id`` (the run's last answer)."""

    type: Literal["feedback"]
    message_id: Annotated[int, Field(ge=1, le=2**63 - 1)] | None = None
    request_id: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    rating: Literal["up", "down"]
    comment: Annotated[str, Field(max_length=4000)] = ""

    @pydantic.model_validator(mode="after")
    def _one_answer(self) -> FeedbackFrame:
        if (self.message_id is None) == (self.request_id is None):
            raise ValueError("name the answer by 'message_id' or by 'request_id'")
        return self


class RequestHumanFrame(_Inbound):
    """The person asks for a member of the team ("Talk to a person")."""

    type: Literal["request_human"]
    reason: Annotated[str, Field(max_length=500)] = ""


class TakeoverFrame(_Inbound):
    """Staff: answer in this chat as themselves; the assistant stops and waits."""

    type: Literal["takeover"]


class StaffMessageFrame(_Inbound):
    """Staff: write to the customer in a chat they took over."""

    type: Literal["staff_message"]
    content: NonBlank


class HandBackFrame(_Inbound):
    """Staff: the assistant answers again."""

    type: Literal["hand_back"]


#: The frames only staff (``agent_app.staff_chat``) may send.
STAFF_FRAMES = frozenset({"takeover", "staff_message", "hand_back"})

InboundFrame = (
    UserMessageFrame
    | ExternalEventFrame
    | SteerFrame
    | CancelFrame
    | PingFrame
    | HistoryBeforeFrame
    | RegenerateFrame
    | EditLastFrame
    | EditFrame
    | SwitchVersionFrame
    | FeedbackFrame
    | RequestHumanFrame
    | TakeoverFrame
    | StaffMessageFrame
    | HandBackFrame
)

_INBOUND: dict[str, type[_Inbound]] = {
    "user_message": UserMessageFrame,
    "external_event": ExternalEventFrame,
    "steer": SteerFrame,
    "cancel": CancelFrame,
    "ping": PingFrame,
    "history_before": HistoryBeforeFrame,
    "regenerate": RegenerateFrame,
    "edit_last": EditLastFrame,
    "edit": EditFrame,
    "switch_version": SwitchVersionFrame,
    "feedback": FeedbackFrame,
    "request_human": RequestHumanFrame,
    "takeover": TakeoverFrame,
    "staff_message": StaffMessageFrame,
    "hand_back": HandBackFrame,
}


def parse_frame(text: str) -> InboundFrame:
    """Validate one inbound text frame; raise ``FrameError`` with the code to report."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_FRAME_BYTES:
        raise FrameError(
            ErrorCode.TOO_LARGE, f"Frame is {size} bytes; the limit is {MAX_FRAME_BYTES} bytes"
        )
    data = _decode(text)
    _check_values(data)
    if not isinstance(data, dict):
        raise FrameError(
            ErrorCode.BAD_FRAME, f"A frame must be a JSON object, got {_json_kind(data)}"
        )
    kind = data.get("type")
    if not isinstance(kind, str):
        raise FrameError(
            ErrorCode.BAD_FRAME,
            "A frame needs a string 'type'"
            + ("" if "type" not in data else f", got {_json_kind(kind)}"),
        )
    model = _INBOUND.get(kind)
    if model is None:
        raise FrameError(
            ErrorCode.UNKNOWN_TYPE,
            f"Unknown frame type {_short(kind, 32)}; expected one of {sorted(_INBOUND)}",
        )
    try:
        frame = model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise FrameError(ErrorCode.BAD_FRAME, _describe(kind, exc)) from None
    if isinstance(
        frame, UserMessageFrame | SteerFrame | EditLastFrame | EditFrame | StaffMessageFrame
    ):
        _check_content(kind, frame.content)
    return frame


def steering_refusal(payload: dict[str, Any]) -> ReplyReason | None:
    """Why a ``steering_message`` payload is refused before delivery, or None.

    Steering is user text whichever frame carries it, so it obeys the rules of ``steer``;
    an ``external_event`` is still answered by ``external_event_result``, never ``error``:
    the reason is ``invalid`` (no non-blank string ``content``) or ``too_large``.
    """
    content = payload.get("content")
    if not isinstance(content, str) or not content.strip():
        return ReplyReason.INVALID
    return ReplyReason.TOO_LARGE if _oversize(content) else None


def _decode(text: str) -> Any:
    """``json.loads`` that answers every failure with ``bad_json``."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise FrameError(
            ErrorCode.BAD_JSON, f"Frame nests too deeply; the limit is {MAX_DEPTH} levels"
        ) from None
    except ValueError as exc:  # JSONDecodeError, and integers of more than 4300 digits
        raise FrameError(ErrorCode.BAD_JSON, f"Frame is not valid JSON: {_short(exc)}") from None


def _refuse_constant(name: str) -> Any:
    raise FrameError(ErrorCode.BAD_JSON, f"Frame is not valid JSON: {name} is not a JSON number")


#: NUL and unpaired surrogates: ``json.loads`` joins every valid pair into one code point,
#: so any surrogate left in a decoded string is unpaired.
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def _check_values(data: Any) -> None:
    """Refuse what no column can store or socket can send; iterative, so depth is safe."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise FrameError(
                    ErrorCode.BAD_JSON, f"Frame nests too deeply; the limit is {MAX_DEPTH} levels"
                )
            if isinstance(value, dict):
                for key, item in value.items():
                    _check_text(key)
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise FrameError(
                    ErrorCode.BAD_JSON, "Frame is not valid JSON: a number is too large"
                )
        elif isinstance(value, int) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise FrameError(
                ErrorCode.BAD_FRAME, "A number in the frame is out of range (64-bit integers)"
            )


def _check_text(text: str) -> None:
    found = _UNSTORABLE.search(text)
    if found is not None:
        what = "NUL (\\u0000)" if found.group() == "\x00" else "an unpaired surrogate"
        raise FrameError(ErrorCode.BAD_FRAME, f"Text in a frame may not contain {what}")


def _check_content(what: str, content: str) -> None:
    if content_size := _oversize(content):
        raise FrameError(
            ErrorCode.TOO_LARGE,
            f"{what} content is {content_size} bytes; the limit is {MAX_CONTENT_BYTES} bytes",
        )


def _oversize(content: str) -> int:
    """UTF-8 bytes of ``content`` when over ``MAX_CONTENT_BYTES``, else 0."""
    if len(content) * 4 <= MAX_CONTENT_BYTES:  # at most 4 bytes a character: fits, unmeasured
        return 0
    size = len(content.encode("utf-8"))
    return size if size > MAX_CONTENT_BYTES else 0


def _short(value: Any, limit: int = 80) -> str:
    """``repr``-ish text of client input for an error message: escaped and bounded."""
    text = repr(value) if isinstance(value, str) else str(value)
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _describe(kind: str, exc: pydantic.ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "frame"
        if error["type"] == "missing":
            problems.append(f"'{field}' is required")
        elif error["type"] == "blank":
            problems.append(f"'{field}' cannot be blank")
        else:
            problems.append(f"'{field}': {error['msg']}")
    return f"Invalid {kind} frame: " + "; ".join(problems)


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
    #: The chat's title now: a new chat is named after its first message (``agent_app.titles``).
    title: str = ""


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
