"""The text of a document attachment: decoded UTF-8, or the text layer of a PDF (pypdf).

A PDF's pages are joined under ``[page N]`` headings, so a model can say where it read
something. A PDF with no text layer (scanned pages) has no text: the note the model gets
says so instead of pretending the file is empty.
"""

from __future__ import annotations

import io

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from agent_app.attachments.refusals import AttachmentRefused
from agent_app.attachments.sniffing import TEXT_TYPES

__all__ = ["document_text", "open_pdf"]


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


def document_text(data: bytes, media_type: str) -> str:
    """The text of a document: UTF-8 text as is, a PDF's pages under ``[page N]`` headings.

    Raises ``ValueError`` for a type that is not a document (an image).
    """
    if media_type in TEXT_TYPES:
        return data.decode("utf-8-sig", errors="replace")
    if media_type != "application/pdf":
        raise ValueError(f"{media_type} has no text")
    pages = []
    for number, page in enumerate(open_pdf(data).pages, start=1):
        try:
            text = page.extract_text().strip()
        except (PyPdfError, ValueError, KeyError, TypeError, RecursionError):
            text = "(this page could not be read)"
        if text:
            pages.append(f"[page {number}]\n{text}")
    return "\n\n".join(pages)
