"""The text of a document attachment: decoded UTF-8, or the text layer of a PDF (pypdf).

A PDF's pages are joined under ``[page N]`` headings, so a model can say where it read
something. A PDF with no text layer (scanned pages) has no text: the note the model gets
says so instead of pretending the file is empty.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from agent_app.attachments.refusals import AttachmentRefused
from agent_app.attachments.sniffing import TEXT_TYPES

__all__ = ["DocumentText", "document_text", "open_pdf"]


def open_pdf(data: bytes, name: str = "The file") -> PdfReader:
    """Open a PDF with pypdf; ``AttachmentRefused`` (``bad_file``) when it is broken or locked."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentRefused(
                "bad_file", f"“{name}” is password-protected; attach a copy without a password."
            )
        len(reader.pages)
    except AttachmentRefused:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError):
        raise AttachmentRefused("bad_file", f"“{name}” is a damaged PDF.") from None
    return reader


@dataclass(frozen=True, slots=True)
class DocumentText:
    """A document's text, or its beginning when ``complete`` is False."""

    text: str
    #: ``text`` is the whole document.
    complete: bool
    #: A PDF's number of pages; None for text files.
    pages: int | None = None


def document_text(data: bytes, media_type: str, *, at_least: int | None = None) -> DocumentText:
    """The text of a document: UTF-8 text as is, a PDF's pages under ``[page N]`` headings.

    With ``at_least``, a PDF's pages are extracted only until the text has that many
    characters (a 900-page PDF attached for its first paragraphs costs a few pages). The
    last few results are kept: every model call of a run builds the same parts again.
    Raises ``ValueError`` for a type that is not a document (an image).
    """
    if media_type in TEXT_TYPES:
        return DocumentText(data.decode("utf-8-sig", errors="replace"), complete=True)
    if media_type != "application/pdf":
        raise ValueError(f"{media_type} has no text")
    return _pdf_text(data, at_least)


@functools.lru_cache(maxsize=4)
def _pdf_text(data: bytes, at_least: int | None) -> DocumentText:
    pages = open_pdf(data).pages
    parts: list[str] = []
    length = 0
    for number, page in enumerate(pages, start=1):
        try:
            text = page.extract_text().strip()
        except (PyPdfError, ValueError, KeyError, TypeError, RecursionError):
            text = "(this page could not be read)"
        if text:
            parts.append(f"[page {number}]\n{text}")
            length += len(parts[-1]) + 2
        if at_least is not None and length >= at_least and number < len(pages):
            return DocumentText("\n\n".join(parts), complete=False, pages=len(pages))
    return DocumentText("\n\n".join(parts), complete=True, pages=len(pages))
