"""Questions and approvals as AG-UI interrupts, and ``resume`` entries as zett replies.

A run that asks the user something (the ``ask_user`` tool) or waits for an approval (a tool
in ``approval_required``) emits a CUSTOM event, ``ask_user`` or ``approval_requested``,
whose payload names the waiting tool call (``tool_call_id``). Over AG-UI that wait ends the
stream with ``RUN_FINISHED`` and an interrupt outcome (``agent_app.agui.encoder``); each
interrupt is built here from the same payload, so a page's socket and an AG-UI client are
shown the same question:

- ``id`` and ``toolCallId`` are the waiting call's id: one wait a call, stable across
  replays and restarts;
- ``reason`` is ``input_required`` for a question, ``confirmation`` for an approval;
- ``message`` is the question; ``responseSchema`` the JSON Schema of the expected
  ``payload``; ``expiresAt`` the deadline (ISO 8601, UTC); ``metadata.zett`` the whole
  payload as the socket carries it (options, the tool and its arguments, the digest …).

``replies_for`` turns a ``RunAgentInput.resume`` into the replies (``ExternalEvent``) a
socket sends for the same answers (docs/protocol.md, "The app's CUSTOM events and their
replies"), so a resume goes through the one reply path — audit record, exactly-once claim,
digest, deadline.
``refusal_code`` names the ``RUN_ERROR`` code for a reply that path refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.protocol.frames import MAX_CONTENT_BYTES
from zett_agent.extensions.external import ExternalEvent

if TYPE_CHECKING:
    from agent_app.agui.run_input import ResumeEntry

__all__ = [
    "APPROVAL_EVENT",
    "ASK_USER_EVENT",
    "InterruptKind",
    "interrupt_for",
    "refusal_code",
    "replies_for",
    "wait_of",
]

#: The CUSTOM events that announce a wait, and the replies that answer them (the wire
#: names of docs/protocol.md).
ASK_USER_EVENT = "ask_user"
APPROVAL_EVENT = "approval_requested"
ASK_USER_RESPONSE = "ask_user_response"
APPROVAL_RESPONSE = "approval_response"

#: What an interrupt waits for: the ``kind`` of the wait in zett's store, or ``mcp`` for an
#: MCP server's question (an ``ask_user`` wait of ``source: "mcp"``: it may be declined
#: or cancelled, which the server is told).
InterruptKind = Literal["ask_user", "approval", "mcp"]
#: How an MCP server's question may be answered (the elicitation's actions).
_MCP_ACTIONS = ("accept", "decline", "cancel")
_KIND_OF_EVENT: dict[str, InterruptKind] = {ASK_USER_EVENT: "ask_user", APPROVAL_EVENT: "approval"}

#: Why the reply path refused a reply (``external_event_result.reason``) → ``RUN_ERROR.code``.
_REFUSALS: dict[str, ErrorCode] = {
    "expired": ErrorCode.INTERRUPT_EXPIRED,
    "stale": ErrorCode.INTERRUPT_ANSWERED,
    "mismatch": ErrorCode.DIGEST_MISMATCH,
    "not_running": ErrorCode.UNKNOWN_INTERRUPT,
    "unknown": ErrorCode.UNKNOWN_INTERRUPT,
    "invalid": ErrorCode.INVALID_RESUME,
    "not_allowed": ErrorCode.INVALID_RESUME,
    "too_large": ErrorCode.TOO_LARGE,
    "internal": ErrorCode.INTERNAL,
}

#: NUL and unpaired surrogates cannot be stored (the socket refuses them the same way).
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def wait_of(name: Any, payload: Any) -> InterruptKind | None:
    """The kind of wait a CUSTOM event announces, or None for any other event."""
    kind = _KIND_OF_EVENT.get(name) if isinstance(name, str) else None
    if kind is None or not isinstance(payload, dict):
        return None
    return kind if isinstance(payload.get("tool_call_id"), str) else None


def interrupt_for(
    name: str, payload: dict[str, Any], expires_at: str | None = None
) -> dict[str, Any] | None:
    """The AG-UI ``Interrupt`` of a wait's CUSTOM event (None if it announces none).

    ``expires_at`` is used when the payload has none (a stored wait's own deadline).
    """
    kind = wait_of(name, payload)
    if kind is None:
        return None
    call_id = payload["tool_call_id"]
    interrupt: dict[str, Any] = {
        "id": call_id,
        "reason": "input_required" if kind == "ask_user" else "confirmation",
        "toolCallId": call_id,
    }
    question = payload.get("question")
    if isinstance(question, str):
        interrupt["message"] = question
    interrupt["responseSchema"] = (
        _answer_schema(payload) if kind == "ask_user" else _approval_schema(payload)
    )
    deadline = payload.get("expires_at") or expires_at
    if isinstance(deadline, str):
        interrupt["expiresAt"] = deadline
    interrupt["metadata"] = {"zett": {"name": name, "payload": payload}}
    return interrupt


def _answer_schema(payload: dict[str, Any]) -> dict[str, Any]:
    options = payload.get("options")
    if isinstance(options, list) and options:
        choice: dict[str, Any] = {"type": "string", "enum": options}
        answer = (
            {"type": "array", "items": choice, "minItems": 1, "uniqueItems": True}
            if payload.get("allow_multiple")
            else choice
        )
    elif isinstance(payload.get("requested_schema"), dict) and _fields(payload) != 1:
        answer = payload["requested_schema"]  # an MCP server's question of several fields
    else:
        answer = {"type": "string", "minLength": 1}
    if payload.get("source") == "mcp":
        # A server's question may also be declined or cancelled: {"action": "decline"}.
        return {
            "type": "object",
            "properties": {"answer": answer, "action": {"enum": list(_MCP_ACTIONS)}},
            "anyOf": [
                {"required": ["answer"]},
                {"properties": {"action": {"enum": ["decline", "cancel"]}}, "required": ["action"]},
            ],
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": {"answer": answer},
        "required": ["answer"],
        "additionalProperties": False,
    }


def _fields(payload: dict[str, Any]) -> int:
    properties = payload["requested_schema"].get("properties")
    return len(properties) if isinstance(properties, dict) else 0


def _approval_schema(payload: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {"approved": {"type": "boolean"}}
    digest = payload.get("digest")
    if isinstance(digest, str):
        properties["digest"] = {"type": "string", "const": digest}
    return {
        "type": "object",
        "properties": properties,
        "required": ["approved"],
        "additionalProperties": False,
    }


def replies_for(
    resume: Sequence[ResumeEntry], kinds: Mapping[str, InterruptKind]
) -> list[ExternalEvent]:
    """The replies that ``resume`` stands for, in its order (``name`` and ``payload`` as a
    socket's ``external_event`` frame carries them).

    ``kinds`` maps the thread's interrupt ids (its waits' tool call ids, answered or not)
    to their kind. Whether each reply is still accepted — not answered yet, not expired,
    the digest right — is the reply path's to say; refused here is only what no reply can
    express: an id the thread never had, one interrupt answered twice in one resume, a
    status or payload that does not answer its interrupt.
    """
    replies: list[ExternalEvent] = []
    seen: set[str] = set()
    for index, entry in enumerate(resume):
        where = f"resume[{index}]"
        interrupt_id = entry.interrupt_id
        kind = kinds.get(interrupt_id)
        if kind is None:
            raise AguiError(
                ErrorCode.UNKNOWN_INTERRUPT,
                f"{where}: this thread has no interrupt {interrupt_id!r}",
            )
        if interrupt_id in seen:
            raise AguiError(
                ErrorCode.INVALID_RESUME, f"{where}: interrupt {interrupt_id!r} is answered twice"
            )
        seen.add(interrupt_id)
        if kind == "approval":
            replies.append(_approval_reply(where, interrupt_id, entry))
        elif kind == "mcp":
            replies.append(_mcp_reply(where, interrupt_id, entry))
        else:
            replies.append(_answer_reply(where, interrupt_id, entry))
    return replies


def _approval_reply(where: str, call_id: str, entry: ResumeEntry) -> ExternalEvent:
    payload: dict[str, Any] = {"tool_call_id": call_id}
    if entry.status == "cancelled":
        payload["approved"] = False  # dismissing an approval denies the call
        return ExternalEvent(APPROVAL_RESPONSE, payload)
    given = entry.payload
    approved = given.get("approved") if isinstance(given, dict) else None
    if not isinstance(approved, bool):
        raise AguiError(
            ErrorCode.INVALID_RESUME,
            f'{where}: an approval is answered with payload {{"approved": true|false}}',
        )
    payload["approved"] = approved
    digest = given.get("digest")
    if digest is not None:
        if not isinstance(digest, str):
            raise AguiError(ErrorCode.INVALID_RESUME, f"{where}: digest must be a string")
        payload["digest"] = digest
    return ExternalEvent(APPROVAL_RESPONSE, payload)


def _mcp_reply(where: str, call_id: str, entry: ResumeEntry) -> ExternalEvent:
    """An MCP server's question: ``cancelled`` cancels it, ``{"action": "decline"}``
    declines it (the server hears either), anything else answers it like a question."""
    if entry.status == "cancelled":
        return ExternalEvent(ASK_USER_RESPONSE, {"tool_call_id": call_id, "action": "cancel"})
    given = entry.payload
    action = given.get("action", "accept") if isinstance(given, dict) else "accept"
    if action not in _MCP_ACTIONS:
        raise AguiError(
            ErrorCode.INVALID_RESUME,
            f"{where}: action must be one of {', '.join(_MCP_ACTIONS)}, got {action!r}",
        )
    if action != "accept":
        return ExternalEvent(ASK_USER_RESPONSE, {"tool_call_id": call_id, "action": action})
    return _answer_reply(where, call_id, entry)


def _answer_reply(where: str, call_id: str, entry: ResumeEntry) -> ExternalEvent:
    if entry.status == "cancelled":
        raise AguiError(
            ErrorCode.INVALID_RESUME,
            f"{where}: a question cannot be dismissed; answer it, or cancel the run",
        )
    given = entry.payload
    answer = given.get("answer") if isinstance(given, dict) else given
    if isinstance(answer, dict):
        # The fields of an MCP server's question: the reply path checks them against its schema.
        return ExternalEvent(ASK_USER_RESPONSE, {"tool_call_id": call_id, "answer": answer})
    if isinstance(answer, str):
        texts = [answer]
    elif isinstance(answer, list) and answer and all(isinstance(item, str) for item in answer):
        texts = answer
    else:
        raise AguiError(
            ErrorCode.INVALID_RESUME,
            f'{where}: a question is answered with payload {{"answer": <text, or a list of '
            "texts>}",
        )
    if not any(text.strip() for text in texts):
        raise AguiError(ErrorCode.INVALID_RESUME, f"{where}: the answer is blank")
    for text in texts:
        if _UNSTORABLE.search(text):
            raise AguiError(
                ErrorCode.INVALID_RESUME,
                f"{where}: the answer may not contain NUL or an unpaired surrogate",
            )
    if sum(len(text.encode("utf-8")) for text in texts) > MAX_CONTENT_BYTES:
        raise AguiError(
            ErrorCode.TOO_LARGE, f"{where}: the answer is over {MAX_CONTENT_BYTES} bytes"
        )
    return ExternalEvent(ASK_USER_RESPONSE, {"tool_call_id": call_id, "answer": answer})


def refusal_code(reason: str | None) -> ErrorCode:
    """The ``RUN_ERROR`` code for a reply the reply path refused with ``reason``."""
    return _REFUSALS.get(reason or "", ErrorCode.INVALID_RESUME)
