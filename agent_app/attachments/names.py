"""Display names of attachments: what the person called the file, made harmless.

The name is shown in chips and the transcript, sent to the model and offered as a download
name, so it keeps the person's own spelling (spaces, accents, parentheses) and its extension.
Django's ``get_valid_filename`` is for storage names (it turns spaces into underscores and
drops most punctuation); the storage name of an attachment is chosen by the app, never by
this one.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["DEFAULT_NAME", "MAX_NAME_LENGTH", "name_extension", "sanitize_name"]

#: The longest name kept, in characters (the extension included).
MAX_NAME_LENGTH = 120
#: The name of a file whose own name has nothing left once cleaned.
DEFAULT_NAME = "attachment"
#: An extension worth keeping: a dot, then up to ten letters or digits.
_EXTENSION = re.compile(r"\.[^\W_]{1,10}$")
_SPACES = re.compile(r"\s+")


def sanitize_name(name: str | None, *, max_length: int = MAX_NAME_LENGTH) -> str:
    """Return ``name`` without a directory, control or format characters, capped in length.

    Directory parts (``/`` or ``\\``) are dropped, so ``../../etc/passwd`` is ``passwd``;
    control and invisible format characters (a right-to-left override that shows
    ``exe.png`` for ``png.exe``) are removed; runs of white space become one space; leading
    dots (hidden files) and trailing dots and spaces are stripped. A name longer than
    ``max_length`` loses characters from its stem, never its extension. A name with nothing
    left is ``attachment`` (with the extension, if it had one).
    """
    if max_length < 1 + 11:
        raise ValueError(
            f"max_length must leave room for a stem and an extension, got {max_length}"
        )
    text = unicodedata.normalize("NFC", name or "")
    text = re.split(r"[/\\]", text)[-1]
    text = "".join(
        " " if unicodedata.category(char) in ("Zl", "Zp") or char in "\t\n\r\v\f" else char
        for char in text
        if not unicodedata.category(char).startswith("C") or char in "\t\n\r\v\f"
    )
    text = _SPACES.sub(" ", text).strip().lstrip(".").rstrip(". ").strip()
    extension = name_extension(text)
    stem = text[: len(text) - len(extension)].rstrip(". ")
    if not stem:
        return DEFAULT_NAME + extension
    return stem[: max_length - len(extension)].rstrip(". ") + extension


def name_extension(name: str) -> str:
    """The extension of ``name`` as written (``".PNG"``), or ``""`` when it has none."""
    match = _EXTENSION.search(name)
    if match is None or match.start() == 0:
        return ""
    return match.group()
