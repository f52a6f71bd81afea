"""An AG-UI ``RunAgentInput`` (the body of a POST), validated into what a zett run needs.

AG-UI clients send the whole conversation with every run; zett keeps the conversation
itself (a chat's stored history), so only two things are read:

- without ``resume``: the text of the **last message**, which must be a user message —
  the message the new run answers — and its image and document parts
  (``agent_app.agui.attachments``);
- with ``resume``: the answers to the thread's interrupts (``messages`` may be ``[]``, and
  are not read).

``threadId`` is the chat id (a UUID, written canonically). ``runId``, ``state``, ``tools``
(tools the client would run itself: not offered to the model), ``context`` and
``forwardedProps`` are validated for shape and otherwise ignored; unknown keys are allowed,
as AG-UI wants. Everything else refused is an ``AguiError`` with a code.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent_app.agui.attachments import FILE_PARTS, FilePart, parts_of
from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.protocol.frames import MAX_CONTENT_BYTES

__all__ = ["MAX_INPUT_BYTES", "ResumeEntry", "RunAgentInput", "RunRequest", "parse_run_input"]

#: Largest body accepted: AG-UI clients resend the conversation, so it is far above the
#: 32 KiB of the one message that is read.
MAX_INPUT_BYTES = 4 * 1024 * 1024

_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


class _Model(BaseModel):
    """AG-UI's JSON is camelCase; unknown keys are kept, not refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class InputMessage(_Model):
    id: str
    role: Literal["developer", "system", "assistant", "user", "tool", "activity", "reasoning"]
    content: Any = None


class Tool(_Model):
    name: str
    description: str = ""
    parameters: Any = None


class Context(_Model):
    description: str
    value: str


class ResumeEntry(_Model):
    """One answer: ``interruptId`` (the interrupt's ``id``), ``status``, ``payload``."""

    interrupt_id: str = Field(min_length=1)
    status: Literal["resolved", "cancelled"]
    payload: Any = None
    metadata: dict[str, Any] | None = None


class RunAgentInput(_Model):
    thread_id: str
    run_id: str
    parent_run_id: str | None = None
    protocol_version: str | None = None
    state: Any = None
    messages: list[InputMessage]
    tools: list[Tool] | None = None
    context: list[Context] | None = None
    forwarded_props: Any = None
    resume: list[ResumeEntry] | None = None


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What a POST asks of zett."""

    #: The chat (``threadId``), canonical UUID text.
    thread_id: str
    #: The client's ``runId`` (zett's request id names the run it starts).
    client_run_id: str
    #: The user's new message; None when the request resumes interrupts.
    text: str | None
    #: The answers to the thread's interrupts (empty for a new message).
    resume: tuple[ResumeEntry, ...] = ()
    #: The image and document parts of the user's message (``agent_app.agui.attachments``).
    files: tuple[FilePart, ...] = ()


def parse_run_input(body: bytes | str, *, max_bytes: int = MAX_INPUT_BYTES) -> RunRequest:
    """Validate a POST body; ``AguiError`` (``bad_json``, ``bad_input`` …) when refused."""
    size = len(body) if isinstance(body, bytes) else len(body.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise AguiError(
            ErrorCode.TOO_LARGE, f"The body is {size} bytes; the limit is {max_bytes}", status=413
        )
    data = _decode(body)
    if not isinstance(data, dict):
        raise AguiError(ErrorCode.BAD_INPUT, "The body must be a JSON object (a RunAgentInput)")
    try:
        run_input = RunAgentInput.model_validate(data)
    except pydantic.ValidationError as exc:
        raise AguiError(ErrorCode.BAD_INPUT, _first_problem(exc)) from None
    thread_id = _chat_id(run_input.thread_id)
    if run_input.resume:
        return RunRequest(thread_id, run_input.run_id, None, tuple(run_input.resume))
    text = _new_message(run_input.messages)
    from agent_app import conf

    files = parts_of(run_input.messages[-1].content, int(conf.ZETT_ATTACHMENT_MAX_BYTES))
    return RunRequest(thread_id, run_input.run_id, text, files=files)


def _decode(body: bytes | str) -> Any:
    try:
        return json.loads(body, parse_constant=_not_json)
    except RecursionError:
        raise AguiError(ErrorCode.BAD_JSON, "The body nests too deeply") from None
    except ValueError as exc:  # not JSON, not UTF-8, or a number that is not one
        raise AguiError(ErrorCode.BAD_JSON, f"The body is not valid JSON: {exc}") from None


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _first_problem(exc: pydantic.ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "body"
    more = exc.error_count() - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"Not a valid RunAgentInput: {where}: {error['msg']}{suffix}"


def _chat_id(thread_id: str) -> str:
    try:
        return str(uuid.UUID(thread_id))
    except ValueError:
        raise AguiError(
            ErrorCode.BAD_THREAD_ID, f"threadId must be a chat id (a UUID), got {thread_id!r}"
        ) from None


def _new_message(messages: list[InputMessage]) -> str:
    if not messages or messages[-1].role != "user":
        raise AguiError(
            ErrorCode.NO_USER_MESSAGE,
            "The last message must be the user's new message (or send resume to answer "
            "the thread's interrupts)",
        )
    text = _text_of(messages[-1].content)
    if not text.strip():
        raise AguiError(ErrorCode.NO_USER_MESSAGE, "The user's message is blank")
    if _UNSTORABLE.search(text):
        raise AguiError(
            ErrorCode.BAD_INPUT, "The user's message may not contain NUL or an unpaired surrogate"
        )
    size = len(text.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise AguiError(
            ErrorCode.TOO_LARGE,
            f"The user's message is {size} bytes; the limit is {MAX_CONTENT_BYTES}",
        )
    return text


def _text_of(content: Any) -> str:
    """A user message's text: a string, or its text parts joined by blank lines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            if kind in FILE_PARTS or kind == "binary":
                continue  # a file: ``parts_of`` reads it
            if kind != "text":
                raise AguiError(
                    ErrorCode.UNSUPPORTED_CONTENT,
                    f"The user's message may hold text, image and document parts, not {kind!r}",
                )
            if not isinstance(part.get("text"), str):
                raise AguiError(ErrorCode.BAD_INPUT, "A text part needs a string 'text'")
            texts.append(part["text"])
        return "\n\n".join(texts)
    raise AguiError(ErrorCode.NO_USER_MESSAGE, "The user's message has no text content")
