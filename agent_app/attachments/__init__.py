"""Attachments: the checks a file passes before it is stored, and how it reaches a model.

- ``validation.check_attachment``: size, type sniffed from the bytes, image pixel limits,
  PDF readability, sanitised name; every refusal an ``AttachmentRefused`` with a ``code``.
- ``content.user_message_with_attachments``: stored bytes → runtime content parts, built
  when the provider request is built (images for models with ``accepts_images = True``,
  documents as text cut to a budget).
- ``extension.AttachmentExtension``: messages hold attachment ids
  (``attributes["attachments"]``); each provider request gets the parts, history never does.
- ``tool.read_attachment_tool``: the tool a model reads the rest of a long document with.
"""

from agent_app.attachments.content import (
    DEFAULT_TEXT_BUDGET,
    AttachmentFile,
    accepts_images,
    attachment_parts,
    user_message_with_attachments,
)
from agent_app.attachments.extension import ATTACHMENTS_ATTRIBUTE, AttachmentExtension
from agent_app.attachments.names import sanitize_name
from agent_app.attachments.refusals import REFUSAL_CODES, AttachmentRefused
from agent_app.attachments.sniffing import DEFAULT_TYPES, KNOWN_TYPES, allowed_types
from agent_app.attachments.tool import read_attachment_tool
from agent_app.attachments.validation import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PIXELS,
    CheckedAttachment,
    check_attachment,
    check_size,
)

__all__ = [
    "ATTACHMENTS_ATTRIBUTE",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_TEXT_BUDGET",
    "DEFAULT_TYPES",
    "KNOWN_TYPES",
    "REFUSAL_CODES",
    "AttachmentExtension",
    "AttachmentFile",
    "AttachmentRefused",
    "CheckedAttachment",
    "accepts_images",
    "allowed_types",
    "attachment_parts",
    "check_attachment",
    "check_size",
    "read_attachment_tool",
    "sanitize_name",
    "user_message_with_attachments",
]
