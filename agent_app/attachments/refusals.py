"""``AttachmentRefused``: the one error every refused upload raises.

A refusal carries a stable ``code`` a client can branch on and a ``message`` written for the
person who picked the file, so a page can show it as is next to the file's chip.
"""

from __future__ import annotations

__all__ = ["REFUSAL_CODES", "AttachmentRefused"]

#: Every code ``AttachmentRefused`` is raised with.
REFUSAL_CODES = frozenset(
    {
        "empty",  # zero bytes
        "too_large",  # more bytes than the limit
        "unsupported_type",  # the bytes are no type on the allowed list
        "type_mismatch",  # the name's extension says one type, the bytes another
        "image_too_large",  # more pixels than the limit (a decompression bomb, or just huge)
        "bad_file",  # the bytes claim a type but are broken: truncated, corrupt, encrypted
        "quota_exceeded",  # the person's daily count or bytes of attachments is used up
    }
)


class AttachmentRefused(ValueError):
    """A file that may not be attached; ``code`` is one of ``REFUSAL_CODES``."""

    def __init__(self, code: str, message: str) -> None:
        if code not in REFUSAL_CODES:
            raise ValueError(f"unknown refusal code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message

    def as_dict(self) -> dict[str, str]:
        """The refusal as a JSON body: ``{"code": ..., "message": ...}``."""
        return {"code": self.code, "message": self.message}
