"""Image and document parts of an AG-UI user message, as the chat's attachments.

A ``RunAgentInput``'s last user message may carry ``image`` and ``document`` parts beside
its text (and the older ``binary`` part). Each becomes an attachment of the chat exactly as
an upload does (``agent_app.attachments``): the same size limit, type sniffing, image and
PDF checks, and the person's daily quota; the run's message then names them as a socket's
``user_message`` names its uploaded files. Sources:

- ``{"type": "data", "value": <base64>, "mimeType": …}``: the bytes (checked by what they
  are, not by the type claimed);
- ``{"type": "file", "value": <attachment id>}``: a file uploaded to this chat before
  (``POST api/chats/<id>/attachments/``);
- ``{"type": "url"}`` is refused: zett does not fetch URLs for a client.

``parts_of`` (pure, at parse time) reads the parts; ``store_parts`` (in a thread, once the
chat exists) checks and stores them, or raises ``AguiError`` naming the part at fault.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.protocol.frames import MAX_ATTACHMENTS

__all__ = ["FilePart", "parts_of", "store_parts"]

#: The parts read as files, and the older ``binary`` part.
FILE_PARTS = frozenset({"image", "document"})
_DEFAULT_NAMES = {"image": "image", "document": "document", "binary": "file"}


@dataclass(frozen=True, slots=True)
class FilePart:
    """One file of the user's message: its bytes, or the id of a file uploaded before."""

    where: str
    name: str
    data: bytes | None = None
    attachment_id: str | None = None


def parts_of(content: Any, max_bytes: int) -> tuple[FilePart, ...]:
    """The file parts of a user message's ``content`` (a list of parts), in order."""
    if not isinstance(content, list):
        return ()
    files = []
    for index, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") in (*FILE_PARTS, "binary"):
            files.append(_file_part(f"content[{index}]", part, max_bytes))
    if len(files) > MAX_ATTACHMENTS:
        raise AguiError(
            ErrorCode.BAD_INPUT,
            f"The user's message holds {len(files)} files; the most is {MAX_ATTACHMENTS}",
        )
    return tuple(files)


def _file_part(where: str, part: dict[str, Any], max_bytes: int) -> FilePart:
    kind = part["type"]
    metadata = part.get("metadata") if isinstance(part.get("metadata"), dict) else {}
    name = part.get("filename") or metadata.get("filename") or metadata.get("name")
    name = name if isinstance(name, str) and name.strip() else _DEFAULT_NAMES[kind]
    if kind == "binary":  # before 1.0: {mimeType, data | url | id, filename}
        source = {"type": "data", "value": part.get("data")} if part.get("data") else None
        if source is None and isinstance(part.get("id"), str):
            source = {"type": "file", "value": part["id"]}
        if source is None and part.get("url"):
            source = {"type": "url"}
    else:
        source = part.get("source")
    if not isinstance(source, dict) or source.get("type") not in ("data", "file", "url"):
        raise AguiError(ErrorCode.BAD_INPUT, f"{where}: a {kind} part needs a source")
    if source["type"] == "url":
        raise AguiError(
            ErrorCode.UNSUPPORTED_CONTENT,
            f"{where}: a file given by URL is not fetched; send its data (base64) or upload "
            "it to the chat and give its id",
        )
    value = source.get("value")
    if not isinstance(value, str) or not value:
        raise AguiError(ErrorCode.BAD_INPUT, f"{where}: the source needs a string 'value'")
    if source["type"] == "file":
        return FilePart(where, name, attachment_id=value)
    if len(value) > (max_bytes + 2) // 3 * 4 + 4:  # more base64 than a file of the limit
        raise AguiError(
            ErrorCode.TOO_LARGE,
            f"{where}: the file is over the limit of {max_bytes // (1024 * 1024)} MB",
            status=413,
        )
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise AguiError(ErrorCode.BAD_INPUT, f"{where}: the data is not base64") from None
    return FilePart(where, name, data=data)


def store_parts(session_id: str, uploader: str, parts: tuple[FilePart, ...]) -> list[str]:
    """Check and store each new file as an attachment of the chat (sync: the ORM and the
    storage); the ids of all of them, in order. Nothing is stored when one is refused."""
    from agent_app import conf
    from agent_app.attachments.refusals import AttachmentRefused
    from agent_app.attachments.sniffing import KNOWN_TYPES
    from agent_app.attachments.stored import (
        UnknownAttachments,
        chat_attachment_ids,
        check_quota,
        store_attachment,
    )
    from agent_app.attachments.validation import check_attachment

    most = min(MAX_ATTACHMENTS, int(conf.ZETT_ATTACHMENTS_PER_MESSAGE))
    if len(parts) > most:
        raise AguiError(
            ErrorCode.BAD_INPUT, f"The user's message holds {len(parts)} files; the most is {most}"
        )
    max_bytes = int(conf.ZETT_ATTACHMENT_MAX_BYTES)
    types = conf.ZETT_ATTACHMENT_TYPES
    checked = []
    total = 0
    for part in parts:
        if part.data is None:
            continue
        try:
            result = check_attachment(
                part.data,
                part.name,
                max_bytes=max_bytes,
                types=KNOWN_TYPES if types is None else types,
            )
            total += result.size
            check_quota(uploader, total)
        except AttachmentRefused as refused:
            raise AguiError(
                ErrorCode.ATTACHMENT_REFUSED,
                f"{part.where}: {refused.message}",
                reason=refused.code,
            ) from None
        checked.append((part, result))
    given = [part for part in parts if part.attachment_id is not None]
    try:
        known = chat_attachment_ids(session_id, [part.attachment_id for part in given])
    except UnknownAttachments as unknown:
        raise AguiError(ErrorCode.BAD_INPUT, str(unknown)) from None
    ids = {id(part): known_id for part, known_id in zip(given, known, strict=False)}
    for part, result in checked:
        assert part.data is not None
        ids[id(part)] = str(store_attachment(session_id, uploader, result, part.data).pk)
    return list(dict.fromkeys(ids[id(part)] for part in parts))
