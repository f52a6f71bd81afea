"""The frame protocol of ``/ws/sessions/<uuid>/`` (docs/protocol.md says it in prose).

Every frame is one JSON object with a ``type``. ``parse_frame`` turns raw socket text into
one of the inbound models or raises ``FrameError`` carrying the error code to send back;
checks run from the cheapest to the most specific, so each bad frame gets the code that
names its first problem: size, JSON syntax, shape, type, fields, content size. Outbound
frames are models too (``agent_app.protocol.outbound``, re-exported here), dumped with
``frame.dump()``.
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
from typing import Annotated, Any, Literal

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from agent_app.protocol.outbound import (
    AgentEventFrame,
    BranchSwitchedFrame,
    BudgetExceededFrame,
    BudgetFrame,
    ErrorCode,
    ErrorFrame,
    ErrorInfo,
    ExternalEventResultFrame,
    FrameError,
    HistoryPageFrame,
    OutboundFrame,
    PongFrame,
    Refusal,
    ReplyReason,
    RunCancelledFrame,
    RunFailedFrame,
    RunStartedFrame,
    SessionFrame,
    run_started_frame,
)
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
    "ErrorInfo",
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
    "Refusal",
    "RegenerateFrame",
    "ReplyReason",
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
    "run_started_frame",
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
