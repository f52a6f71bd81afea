"""``AskUserExtension``: a tool with which the model asks the user a question and waits.

The model calls ``ask_user(question, options=None, allow_multiple=False)``. Before the tool
runs, the extension validates the arguments (invalid ones, a blank question included, never
pause: the tool then fails with the validation error), emits an ``AskUserEvent`` and waits
for an ``ask_user_response`` external event whose ``tool_call_id`` matches. The reply's
payload is the tool's result.

``AskUserExtension(timeout=seconds)`` gives every question a deadline (see
``zett_agent.extensions.external``): the event's payload then carries ``expires_at`` (ISO
8601 UTC), and a question nobody answers in time fails the tool with "Nobody answered …";
the request goes on. Without a deadline the payload has no ``expires_at`` key at all.

A reply whose payload has a non-empty ``parts`` list answers with content instead: each
``{"type": "text", "text": ...}`` becomes a ``TextContent`` and each ``{"type": "image",
"name": ..., "content_url": "data:image/...;base64,..."}`` an ``ImageContent`` (at most 32
images, 10 MB in all), so a user can answer with a picture.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pydantic

from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.external import ExternalEventExtension, utc_iso
from zett_agent.messages import ContentPart, ImageContent, ImageUrlSource, TextContent
from zett_agent.tools.base import AgentTool, current_run_context, tool

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext
    from zett_agent.messages import ToolCall

__all__ = [
    "ASK_USER_EVENT_NAME",
    "ASK_USER_RESPONSE_EVENT",
    "ASK_USER_RESPONSE_EVENT_NAME",
    "ASK_USER_TOOL_NAME",
    "AskUserEvent",
    "AskUserExtension",
]

ASK_USER_TOOL_NAME = "ask_user"
#: The CUSTOM event's name.
ASK_USER_EVENT_NAME = "ask_user"
#: The name of the external event that answers it.
ASK_USER_RESPONSE_EVENT_NAME = "ask_user_response"
ASK_USER_RESPONSE_EVENT = ASK_USER_RESPONSE_EVENT_NAME  # the older name, kept

#: The argument limits, part of the tool's JSON Schema (``minLength``, ``maxItems``). No
#: length is capped: a long question is the UI's to shorten, and is stored whole.
MAX_OPTIONS = 20
Question = Annotated[str, pydantic.Field(min_length=1)]
Option = Annotated[str, pydantic.Field(min_length=1)]
Options = Annotated[list[Option], pydantic.Field(max_length=MAX_OPTIONS)]

MAX_REPLY_IMAGES = 32
MAX_REPLY_IMAGE_BYTES = 10_000_000
_DATA_URL = re.compile(r"data:(image/[A-Za-z0-9.+-]+);base64,([A-Za-z0-9+/]*={0,2})")


class _TextPart(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    type: Literal["text"] = "text"
    text: str


class _ImagePart(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    type: Literal["image"] = "image"
    name: str = pydantic.Field(min_length=1, max_length=500)
    mime_type: str | None = pydantic.Field(default=None, min_length=1, max_length=255)
    content_url: str = pydantic.Field(min_length=1)


class _ReplyParts(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    parts: list[Annotated[_TextPart | _ImagePart, pydantic.Field(discriminator="type")]]


def reply_content(payload: dict[str, Any]) -> list[ContentPart] | None:
    """The content a reply's ``parts`` describe, or None when it has none (use the payload).

    Raises ``ValueError`` for a malformed part, an image that is not a base64 ``data:``
    URL, or images past the limits: the tool then fails with that text.
    """
    raw = payload.get("parts")
    if not isinstance(raw, list) or not raw:
        return None
    parts = _ReplyParts.model_validate({"parts": raw}).parts
    content: list[ContentPart] = []
    images = total = 0
    for part in parts:
        if isinstance(part, _TextPart):
            if part.text:
                content.append(TextContent(part.text))
            continue
        images += 1
        if images > MAX_REPLY_IMAGES:
            raise ValueError(f"An ask_user reply can contain up to {MAX_REPLY_IMAGES} images")
        url = "".join(part.content_url.split())
        match = _DATA_URL.fullmatch(url)
        if match is None:
            raise ValueError(f"Image {part.name} must be a base64 data URL")
        try:
            size = len(base64.b64decode(match.group(2), validate=True))
        except binascii.Error as exc:
            raise ValueError(f"Image {part.name} is not valid base64: {exc}") from None
        if size == 0:
            raise ValueError(f"Image is empty: {part.name}")
        total += size
        if total > MAX_REPLY_IMAGE_BYTES:
            raise ValueError(f"The reply's images exceed {MAX_REPLY_IMAGE_BYTES} bytes in all")
        content.append(ImageContent(ImageUrlSource(url)))
    return content or None


def _check_arguments(question: str, options: list[str] | None, allow_multiple: bool) -> None:
    if not question.strip():
        raise ValueError("question cannot be blank: ask something")
    if options is not None and not options:
        raise ValueError("options must list at least one choice, or be omitted")
    if allow_multiple and not options:
        raise ValueError("allow_multiple needs options to choose from")


class AskUserEvent(AgentEvent):
    """CUSTOM event ``ask_user``: show ``question`` and reply with ``response_event``.

    ``tool_calls`` holds the ``ask_user`` call that asks (when the extension emits it).
    """

    def __init__(
        self,
        *,
        session_id: str,
        tool_call_id: str,
        question: str,
        options: list[str] | None = None,
        allow_multiple: bool = False,
        response_event: str = ASK_USER_RESPONSE_EVENT_NAME,
        expires_at: str | None = None,
        tool_calls: list[ToolCall] | None = None,
    ) -> None:
        payload: dict[str, Any] = {
            "session_id": session_id,
            "tool_call_id": tool_call_id,
            "question": question,
            "options": list(options) if options is not None else None,
            "allow_multiple": allow_multiple,
            "response_event": response_event,
        }
        if expires_at is not None:
            payload["expires_at"] = expires_at
        super().__init__(
            AgentEventType.CUSTOM,
            session_id,
            tool_calls=list(tool_calls or ()),
            name=ASK_USER_EVENT_NAME,
            payload=payload,
        )

    @property
    def tool_call_id(self) -> str:
        return self.payload["tool_call_id"]  # type: ignore[index]

    @property
    def question(self) -> str:
        return self.payload["question"]  # type: ignore[index]

    @property
    def options(self) -> list[str] | None:
        return self.payload["options"]  # type: ignore[index]

    @property
    def allow_multiple(self) -> bool:
        return self.payload["allow_multiple"]  # type: ignore[index]

    @property
    def response_event(self) -> str:
        return self.payload["response_event"]  # type: ignore[index]

    @property
    def expires_at(self) -> str | None:
        """The question's deadline (ISO 8601 UTC), or None when it has none."""
        return self.payload.get("expires_at")  # type: ignore[union-attr]


class AskUserExtension(ExternalEventExtension):
    """Registers ``ask_user`` and pauses it until the user's reply (or the deadline) arrives.

    ``timeout``: seconds each question may wait; None or 0 = no deadline.
    """

    def __init__(self, *, timeout: float | None = None) -> None:
        super().__init__(
            response_event_name=ASK_USER_RESPONSE_EVENT_NAME,
            correlation_field="tool_call_id",
            timeout=timeout,
        )
        self._tool = self._build_tool()

    def _build_tool(self) -> AgentTool:
        extension = self

        @tool(name=ASK_USER_TOOL_NAME)
        async def ask_user(
            question: Question, options: Options | None = None, allow_multiple: bool = False
        ) -> dict[str, Any] | list[ContentPart]:
            """Ask the user a question and wait for the answer.

            Args:
                question: The question, in the user's language.
                options: Choices to offer; omit for a free-text answer.
                allow_multiple: Whether the user may pick several options.

            Snippet:
                ask_user(question="Which city?", options=["Paris", "Rome"])

            Guidelines:
                - Ask only when the request is ambiguous and the answer changes what you do.
                - Ask one short, specific question at a time.
            """
            _check_arguments(question, options, allow_multiple)
            context = current_run_context()
            payload = extension._take_external_event(context).payload
            content = reply_content(payload)
            return payload if content is None else content

        return ask_user

    async def on_tool(self, context: AgentRunContext) -> None:
        context.register_tool(self._tool)

    async def before_tool(self, context: AgentRunContext, call: ToolCall) -> None:
        if call.name != ASK_USER_TOOL_NAME or context.tools.get(call.name) is not self._tool:
            return
        try:
            arguments = self._tool.validate_arguments(call.arguments)
        except ValueError:
            return  # the tool fails with the validation error; never pause for bad input
        try:
            _check_arguments(
                arguments["question"], arguments["options"], arguments["allow_multiple"]
            )
        except ValueError:
            return
        async with self._wait_for_external_event(context, call.id):
            expires_at = self._wait_expires_at(context, call.id)
            await context.emit(
                AskUserEvent(
                    session_id=context.session_id,
                    tool_call_id=call.id,
                    question=arguments["question"],
                    options=arguments["options"],
                    allow_multiple=arguments["allow_multiple"],
                    expires_at=utc_iso(expires_at) if expires_at is not None else None,
                    tool_calls=[call],
                )
            )
