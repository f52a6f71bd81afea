"""What a page may check before it uploads a file: the largest size and the media types
this site takes (``ZETT_ATTACHMENT_MAX_BYTES``, ``ZETT_ATTACHMENT_TYPES``).

The page refuses a file over the limit, or of a type the site never takes, before a byte
is sent; the server checks every upload all the same (``validation``), so these are a
courtesy to the person, never the guard.
"""

from __future__ import annotations

from agent_app import conf
from agent_app.attachments.sniffing import KNOWN_TYPES

__all__ = ["page_limits"]


def page_limits() -> dict[str, object]:
    """``{"maxBytes": …, "types": [...]}`` for a page's configuration (JSON)."""
    types = conf.ZETT_ATTACHMENT_TYPES
    return {
        "maxBytes": int(conf.ZETT_ATTACHMENT_MAX_BYTES),
        "types": sorted(KNOWN_TYPES if types is None else types),
    }
