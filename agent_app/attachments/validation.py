"""``check_attachment``: every check an uploaded file passes before it is stored.

In order, cheapest first, so a hostile file costs as little as possible: the size (before
anything is read, with ``check_size``), the type sniffed from the bytes
(``agent_app.attachments.sniffing``), then what the type itself promises:

- an image's declared dimensions are read from its header and refused above ``max_pixels``
  before a single pixel is decoded (a 100 000 x 100 000 PNG of a few hundred bytes is a
  decompression bomb); then Pillow verifies it and decodes it (JPEGs at an eighth of their
  size), which finds truncated and corrupt files;
- a PDF must open with pypdf and not be password-protected (the model could not read it).

Every refusal is an ``AttachmentRefused`` with a code and a message for the page.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from agent_app.attachments.names import sanitize_name
from agent_app.attachments.refusals import AttachmentRefused
from agent_app.attachments.sniffing import (
    DEFAULT_TYPES,
    IMAGE_TYPES,
    allowed_types,
    label,
    sniff_media_type,
)
from agent_app.attachments.text import open_pdf

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PIXELS",
    "CheckedAttachment",
    "check_attachment",
    "check_size",
    "size_text",
]

#: ``ZETT_ATTACHMENT_MAX_BYTES`` when it is not set: 10 MiB.
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
#: The most pixels an image may have (width x height): 50 megapixels.
DEFAULT_MAX_PIXELS = 50_000_000

_PILLOW_FORMATS = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}


@dataclass(frozen=True, slots=True)
class CheckedAttachment:
    """A file that passed every check: its clean name, sniffed type and size."""

    name: str
    media_type: str
    size: int
    #: Pixel dimensions of an image; None for documents.
    width: int | None = None
    height: int | None = None


def check_size(
    size: int, *, max_bytes: int = DEFAULT_MAX_BYTES, name: str | None = "The file"
) -> None:
    """Refuse ``size`` bytes above ``max_bytes`` (``too_large``) or of nothing (``empty``).

    Call it with an upload's declared size before reading its bytes. ``name`` is the
    file's (None: a body whose file has no name we could read, called "The upload").
    """
    subject = "The upload" if name is None else f"“{name}”"
    if size <= 0:
        raise AttachmentRefused("empty", f"{subject} is empty.")
    if size > max_bytes:
        raise AttachmentRefused(
            "too_large",
            f"{subject} is {size_text(size)}; files can be at most {size_text(max_bytes)}.",
        )


def check_attachment(
    data: bytes,
    name: str | None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    types: Iterable[str] = DEFAULT_TYPES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> CheckedAttachment:
    """Check an uploaded file; return what it is, or raise ``AttachmentRefused``.

    ``name`` is the client's file name (sanitised here); ``max_bytes`` is
    ``ZETT_ATTACHMENT_MAX_BYTES`` and ``types`` is ``ZETT_ATTACHMENT_TYPES`` (media types,
    default ``DEFAULT_TYPES``: PNG, JPEG, GIF, WebP, PDF, plain text, Markdown, CSV, JSON).
    """
    clean = sanitize_name(name)
    check_size(len(data), max_bytes=max_bytes, name=clean)
    media_type = sniff_media_type(data, clean)
    if media_type not in allowed_types(types):
        raise AttachmentRefused(
            "unsupported_type", f"“{clean}” is {label(media_type)}, which cannot be attached here."
        )
    if media_type in IMAGE_TYPES:
        width, height = _check_image(data, clean, media_type, max_pixels)
        return CheckedAttachment(clean, media_type, len(data), width, height)
    if media_type == "application/pdf":
        open_pdf(data, clean)
    return CheckedAttachment(clean, media_type, len(data))


def _check_image(data: bytes, name: str, media_type: str, max_pixels: int) -> tuple[int, int]:
    broken = AttachmentRefused("bad_file", f"“{name}” is a damaged or incomplete image.")
    try:
        with _open_image(data) as image:
            width, height = image.size
            found = _PILLOW_FORMATS.get(image.format or "")
            if width * height > max_pixels:
                raise _too_many_pixels(name, width, height, max_pixels)
            image.verify()
        with _open_image(data) as image:
            if image.format == "JPEG":
                image.draft("RGB", (max(1, width // 8), max(1, height // 8)))
            image.load()
    except AttachmentRefused:
        raise
    except Image.DecompressionBombError:
        raise _too_many_pixels(name, None, None, max_pixels) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError):
        raise broken from None
    if found != media_type:
        raise broken
    return width, height


def _open_image(data: bytes) -> Image.Image:
    # Pillow's own bomb check runs here (a warning above Image.MAX_IMAGE_PIXELS, an error
    # at twice that); it is left alone, since changing warning filters is not thread-safe
    # and the default pixel limit refuses such images anyway.
    return Image.open(io.BytesIO(data))


def _too_many_pixels(
    name: str, width: int | None, height: int | None, max_pixels: int
) -> AttachmentRefused:
    size = f"{width} x {height} pixels" if width is not None else "far too many pixels"
    return AttachmentRefused(
        "image_too_large",
        f"“{name}” is {size}; images can have at most {max_pixels / 1e6:g} megapixels.",
    )


def size_text(size: int) -> str:
    """Bytes for people, written exactly as the page writes them (``upload_check.js``
    ``sizeText``, halves rounded up): "512 B", "12 KB", "19.4 MB", "10 MB"."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{(2 * size + 1024) // 2048} KB"
    tenths = (20 * size + 1024 * 1024) // (2 * 1024 * 1024)
    whole, tenth = divmod(tenths, 10)
    return f"{whole} MB" if tenth == 0 else f"{whole}.{tenth} MB"
