"""What a file is, told from its bytes: magic numbers for binary types, UTF-8 for text.

The client's ``Content-Type`` header and the file's name are claims; the bytes are the
fact. Binary types are recognised by their signatures. Bytes that are valid UTF-8 (a byte
order mark allowed) with no NUL are text, and only then does the extension choose among the
text types: ``.md``/``.markdown`` is Markdown, ``.csv`` is CSV, ``.json`` is JSON when it
parses, anything else plain text. A name whose extension belongs to another type than the
bytes (HTML named ``.png``, a PDF named ``.jpg``) is a ``type_mismatch``.
"""

from __future__ import annotations

import json

from agent_app.attachments.names import name_extension
from agent_app.attachments.refusals import AttachmentRefused

__all__ = [
    "DEFAULT_TYPES",
    "EXTENSIONS",
    "IMAGE_TYPES",
    "KNOWN_TYPES",
    "TEXT_TYPES",
    "allowed_types",
    "sniff_media_type",
]

#: Images the runtime can hand to a model as image parts.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Types that are UTF-8 text.
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/csv", "application/json"})
#: Every type this module can recognise.
KNOWN_TYPES = IMAGE_TYPES | TEXT_TYPES | {"application/pdf"}
#: What is accepted when no list is configured: all of them.
DEFAULT_TYPES = KNOWN_TYPES

#: The extensions each type's files may carry (lower case).
EXTENSIONS: dict[str, frozenset[str]] = {
    "image/png": frozenset({".png"}),
    "image/jpeg": frozenset({".jpg", ".jpeg", ".jpe", ".jfif"}),
    "image/gif": frozenset({".gif"}),
    "image/webp": frozenset({".webp"}),
    "application/pdf": frozenset({".pdf"}),
    "text/plain": frozenset({".txt", ".text"}),
    "text/markdown": frozenset({".md", ".markdown"}),
    "text/csv": frozenset({".csv"}),
    "application/json": frozenset({".json"}),
}
#: Extensions that promise a binary type; text behind one of them is a mismatch.
_BINARY_EXTENSIONS = {
    extension: media_type
    for media_type, extensions in EXTENSIONS.items()
    if media_type not in TEXT_TYPES
    for extension in extensions
}
_TEXT_BY_EXTENSION = {
    extension: media_type
    for media_type, extensions in EXTENSIONS.items()
    if media_type in TEXT_TYPES
    for extension in extensions
}

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)

#: How each type is named in messages people read.
_LABELS = {
    "image/png": "a PNG image",
    "image/jpeg": "a JPEG image",
    "image/gif": "a GIF image",
    "image/webp": "a WebP image",
    "application/pdf": "a PDF",
    "text/plain": "text",
    "text/markdown": "Markdown",
    "text/csv": "CSV",
    "application/json": "JSON",
}


def allowed_types(types: object) -> frozenset[str]:
    """Return ``types`` (an iterable of media types) as a set; ``ValueError`` names a bad one.

    The value of ``ZETT_ATTACHMENT_TYPES``: media types this module recognises
    (``KNOWN_TYPES``); an empty list turns attachments off.
    """
    if isinstance(types, str | bytes) or not hasattr(types, "__iter__"):
        raise ValueError(f"must be a list of media types, got {types!r}")
    chosen = frozenset(types)  # type: ignore[arg-type]
    unknown = sorted(str(item) for item in chosen - KNOWN_TYPES)
    if unknown:
        raise ValueError(
            f"unknown media types {', '.join(unknown)}; known: {', '.join(sorted(KNOWN_TYPES))}"
        )
    return chosen


def label(media_type: str) -> str:
    """``image/png`` → ``a PNG image``: the type as a person reads it."""
    return _LABELS.get(media_type, media_type)


def sniff_media_type(data: bytes, name: str) -> str:
    """The media type of ``data``, checked against the extension of ``name``.

    Raises ``AttachmentRefused``: ``unsupported_type`` for bytes of no known type,
    ``type_mismatch`` when the extension belongs to another type, ``bad_file`` for a
    ``.json`` file that does not parse.
    """
    extension = name_extension(name).lower()
    media_type = _binary_type(data)
    if media_type is not None:
        if extension and extension not in EXTENSIONS[media_type]:
            raise AttachmentRefused(
                "type_mismatch",
                f"“{name}” is named like {_claimed(extension)} but its contents are "
                f"{label(media_type)}. Rename it or pick the right file.",
            )
        return media_type
    text = _as_text(data)
    if text is None:
        raise AttachmentRefused(
            "unsupported_type",
            f"“{name}” is not a file type that can be attached (images, PDFs and text files can).",
        )
    if extension in _BINARY_EXTENSIONS:
        raise AttachmentRefused(
            "type_mismatch",
            f"“{name}” is named like {label(_BINARY_EXTENSIONS[extension])} but its "
            "contents are text.",
        )
    media_type = _TEXT_BY_EXTENSION.get(extension, "text/plain")
    if media_type == "application/json":
        try:
            json.loads(text)
        except ValueError as error:
            raise AttachmentRefused("bad_file", f"“{name}” is not valid JSON ({error}).") from None
    return media_type


def _binary_type(data: bytes) -> str | None:
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _as_text(data: bytes) -> str | None:
    """The text of ``data`` when it is UTF-8 without NUL; None when it is not text."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _claimed(extension: str) -> str:
    media_type = _BINARY_EXTENSIONS.get(extension) or _TEXT_BY_EXTENSION.get(extension)
    return label(media_type) if media_type else f"a {extension} file"
