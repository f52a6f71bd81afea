"""Conversation messages and their content parts.

Messages are plain mutable dataclasses: extensions may edit them (a tool call's arguments, a
result's content) before they are appended. Every message carries three keyword fields:

- ``attributes``: application data that is never sent to a provider;
- ``persist``: whether persistence extensions should store it;
- ``include_in_messages``: whether it belongs to the restorable history. System messages
  default to False: instructions are rebuilt for every request, never restored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, TypeAlias

__all__ = [
    "AgentMessage",
    "AnyMessage",
    "AssistantMessage",
    "CompactedMessage",
    "ContentPart",
    "ImageBytesSource",
    "ImageContent",
    "ImageUrlSource",
    "Message",
    "MessageRole",
    "SystemMessage",
    "TextContent",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
    "content_text",
]


class MessageRole(StrEnum):
    """Who a message speaks for. ``agent`` is the application instructing the agent."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    AGENT = "agent"


@dataclass(slots=True)
class TextContent:
    """A text part of multimodal content."""

    text: str


@dataclass(frozen=True, slots=True)
class ImageUrlSource:
    """An image a provider fetches by URL (``https:`` or ``data:``)."""

    url: str


@dataclass(frozen=True, slots=True)
class ImageBytesSource:
    """Inline image bytes with their media type, e.g. ``image/png``."""

    data: bytes
    media_type: str

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes | bytearray):
            raise TypeError(f"data must be bytes, got {type(self.data).__name__}")
        if not self.media_type or "/" not in self.media_type:
            raise ValueError(f"media_type must look like 'image/png', got {self.media_type!r}")


@dataclass(slots=True)
class ImageContent:
    """An image part of multimodal content."""

    source: ImageUrlSource | ImageBytesSource
    #: Optional provider hint (``"low"``, ``"high"``, ``"auto"``).
    detail: str | None = None
    #: A text description of the image (for people and logs; providers are not sent it).
    alt_text: str | None = None


ContentPart: TypeAlias = TextContent | ImageContent


@dataclass(slots=True)
class ToolCall:
    """A complete tool invocation requested by the model. Mutable: middleware may edit it."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Message:
    """Fields shared by every message; use one of the concrete subclasses."""

    role: ClassVar[MessageRole]

    attributes: dict[str, Any] = field(default_factory=dict, kw_only=True)
    persist: bool = field(default=True, kw_only=True)
    include_in_messages: bool = field(default=True, kw_only=True)


@dataclass(slots=True)
class SystemMessage(Message):
    """Instructions for the model, rebuilt for every request."""

    role: ClassVar[MessageRole] = MessageRole.SYSTEM

    content: str
    include_in_messages: bool = field(default=False, kw_only=True)


@dataclass(slots=True)
class UserMessage(Message):
    """What the user said: text, or a list of text and image parts."""

    role: ClassVar[MessageRole] = MessageRole.USER

    content: str | list[ContentPart]


@dataclass(slots=True)
class AssistantMessage(Message):
    """A complete model answer: text, optional reasoning and the tool calls it requests."""

    role: ClassVar[MessageRole] = MessageRole.ASSISTANT

    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    #: Provider and model that produced the message, when the adapter knows them.
    provider: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tool_calls, tuple):
            self.tool_calls = tuple(self.tool_calls)


@dataclass(slots=True)
class ToolMessage(Message):
    """The result of one tool call; ``success=False`` carries the error text."""

    role: ClassVar[MessageRole] = MessageRole.TOOL

    tool_call_id: str
    name: str
    content: str | list[ContentPart]
    success: bool = True


@dataclass(slots=True)
class AgentMessage(Message):
    """An instruction from the application to the agent; providers see it as a user turn."""

    role: ClassVar[MessageRole] = MessageRole.AGENT

    content: str


@dataclass(slots=True)
class CompactedMessage(AgentMessage):
    """A compaction checkpoint: the summary that stands for older dialogue.

    An ``AgentMessage`` (providers see it as a user turn) marked with
    ``attributes["compaction"] = True``, so it is recognised after a round trip through
    storage; ``zett_agent.serialization`` decodes such a message as a ``CompactedMessage``.
    """

    def __post_init__(self) -> None:
        if self.attributes.get("compaction") is not True:
            self.attributes = {**self.attributes, "compaction": True}


AnyMessage: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage | AgentMessage


def content_text(content: str | list[ContentPart]) -> str:
    """Return the text of message content, joining text parts and skipping images."""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content if isinstance(part, TextContent))
