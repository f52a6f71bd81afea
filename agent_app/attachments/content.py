"""Attachments as the model sees them: content parts built when a request is built.

A stored message holds references; the bytes are read and turned into parts here, for the
model the request goes to, and the parts are never written back to history. So the same
chat can go to a model that sees images and later to one that does not.

- An image becomes an ``ImageContent`` with its bytes for a model with
  ``accepts_images = True``; any other model gets a short text note naming the image.
- A text, Markdown, CSV or JSON file or a PDF becomes text, whole up to ``text_budget``
  characters. A longer one is cut there, with a note saying how much was shown and how much
  there is, and pointing to the ``read_attachment`` tool for the rest when the agent has it.

Extracting a PDF's text is CPU work: from async code, call these in a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_app.attachments.refusals import AttachmentRefused
from agent_app.attachments.sniffing import IMAGE_TYPES
from agent_app.attachments.text import document_text
from zett_agent.messages import (
    ContentPart,
    ImageBytesSource,
    ImageContent,
    TextContent,
    UserMessage,
)

__all__ = [
    "DEFAULT_TEXT_BUDGET",
    "AttachmentFile",
    "accepts_images",
    "attachment_parts",
    "user_message_with_attachments",
]

#: How many characters of one document are put in a message: about 5 000 tokens.
DEFAULT_TEXT_BUDGET = 20_000
#: The tool the note of a cut document points to.
READ_TOOL = "read_attachment"


@dataclass(frozen=True, slots=True)
class AttachmentFile:
    """A stored attachment with its bytes, as the app reads it from storage."""

    id: str
    name: str
    media_type: str
    data: bytes


def accepts_images(model: object) -> bool:
    """Whether ``model`` takes image parts: it says so with ``accepts_images = True``."""
    return getattr(model, "accepts_images", False) is True


def attachment_parts(
    attachment: AttachmentFile,
    *,
    images: bool,
    text_budget: int = DEFAULT_TEXT_BUDGET,
    read_tool: bool = False,
) -> list[ContentPart]:
    """The content parts that carry ``attachment`` to a model.

    ``images``: the model takes image parts. ``read_tool``: the agent has the
    ``read_attachment`` tool, so the note of a cut document tells the model how to read on.
    """
    if text_budget < 1:
        raise ValueError(f"text_budget must be >= 1, got {text_budget}")
    about = f"{attachment.name} ({attachment.media_type}, attachment id {attachment.id})"
    if attachment.media_type in IMAGE_TYPES:
        if images:
            return [
                TextContent(f"[Attached image: {about}]"),
                ImageContent(ImageBytesSource(attachment.data, attachment.media_type)),
            ]
        return [TextContent(f"[Attached image: {about}. This model cannot see images.]")]
    try:
        document = document_text(attachment.data, attachment.media_type, at_least=text_budget + 1)
    except AttachmentRefused as refusal:  # stored before a check that now fails, or damaged
        return [TextContent(f"[Attached file: {about}. It could not be read: {refusal}]")]
    text = document.text
    if not text.strip():
        return [TextContent(f"[Attached file: {about}. It has no text that could be read.]")]
    if document.complete and len(text) <= text_budget:
        return [TextContent(f"[Attached file: {about}]\n{text}\n[End of {attachment.name}]")]
    size = (
        f"has {len(text)} characters"
        if document.complete
        else f"is longer ({document.pages} pages)"
    )
    rest = (
        f'Read the rest with {READ_TOOL}(id="{attachment.id}", start={text_budget}, length=...).'
        if read_tool
        else "The rest is not shown."
    )
    note = (
        f"[Cut: {attachment.name} {size}; only the first {text_budget} characters are "
        f"shown above. {rest}]"
    )
    return [TextContent(f"[Attached file: {about}]\n{text[:text_budget]}\n{note}")]


def user_message_with_attachments(
    text: str,
    attachments: Sequence[AttachmentFile],
    *,
    model: object,
    text_budget: int = DEFAULT_TEXT_BUDGET,
    read_tool: bool = False,
) -> UserMessage:
    """The ``UserMessage`` of ``text`` with each attachment's parts after it, for ``model``.

    With no attachments it is a plain text message, exactly what was sent without them.
    """
    if not attachments:
        return UserMessage(text)
    images = accepts_images(model)
    content: list[ContentPart] = [TextContent(text)] if text else []
    for attachment in attachments:
        content += attachment_parts(
            attachment, images=images, text_budget=text_budget, read_tool=read_tool
        )
    return UserMessage(content)
