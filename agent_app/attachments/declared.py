"""The file an upload declares, read from the head of a body refused for its length.

A body longer than any allowed file is refused before the form is parsed, so Django never
names the file. The refusal should still say which file and how big, in the words the
browser uses for the same check (``“holiday.png” is 19.4 MB; files can be at most
10 MB.``), not a guess from the body's length. Both are in the body's first bytes: the
``file`` part's headers carry its name, and what follows them, less the closing boundary,
is its size (exact when the file is the form's last part, as browsers send it; a little
more when other fields follow it).
"""

from __future__ import annotations

from typing import BinaryIO, NamedTuple

from django.utils.http import parse_header_parameters

__all__ = ["DeclaredFile", "declared_file"]

#: The most bytes read from a refused body to find the file's part headers.
HEAD_BYTES = 16 * 1024


class DeclaredFile(NamedTuple):
    """The name a multipart body gives its ``file`` part, and the part's size in bytes."""

    name: str
    size: int


def declared_file(
    content_type: str, length: int, body: BinaryIO, field: str = "file"
) -> DeclaredFile | None:
    """The ``field`` part of a multipart body of ``length`` bytes, or None if its head does
    not show one (not multipart, no boundary, or the part starts past ``HEAD_BYTES``).

    Reads at most ``HEAD_BYTES`` of ``body``: call it only on a body that is refused anyway.
    """
    kind, params = parse_header_parameters(content_type)
    boundary = params.get("boundary", "")
    if kind != "multipart/form-data" or not boundary:
        return None
    head = body.read(HEAD_BYTES)
    delimiter = b"--" + boundary.encode("latin-1", "replace")
    closing = len(b"\r\n" + delimiter + b"--\r\n")
    position = head.find(delimiter)
    while position != -1:
        headers_start = position + len(delimiter) + 2
        headers_end = head.find(b"\r\n\r\n", headers_start)
        if headers_end == -1:
            return None
        disposition = _header(head[headers_start:headers_end], "content-disposition")
        _, part = parse_header_parameters(disposition)
        if part.get("name") == field and "filename" in part:
            return DeclaredFile(part["filename"], length - (headers_end + 4) - closing)
        position = head.find(delimiter, headers_end)
    return None


def _header(block: bytes, name: str) -> str:
    """The value of header ``name`` in a part's header block ("" if it has none)."""
    for line in block.decode("utf-8", "replace").split("\r\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return ""
