"""Server-Sent Events framing of AG-UI events.

One event is ``id: <seq>`` (when it has one) and one ``data:`` line of compact JSON, then a
blank line. JSON escapes every line break inside strings, so the data is always one line;
the text is made as a socket frame's is (``agent_app.protocol.text.encode_frame``), so it
always encodes to UTF-8.
A comment line (``: keep-alive``) keeps an idle connection open through proxies; clients
ignore it. The response must not be buffered on the way: ``SSE_HEADERS`` say so to proxies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent_app.protocol.text import encode_frame

__all__ = ["CONTENT_TYPE", "KEEP_ALIVE", "SSE_HEADERS", "SseEvent", "encode_events"]

CONTENT_TYPE = "text/event-stream"
#: The comment line sent while a stream is idle.
KEEP_ALIVE = ": keep-alive\n\n"
#: Headers of a stream besides its ``Content-Type``: never cached, never buffered by a proxy.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One AG-UI event (``data``, its JSON object) and its SSE ``id`` (zett's ``seq``), if any."""

    data: dict[str, Any]
    id: int | None = None

    @property
    def type(self) -> str:
        return self.data["type"]

    def encode(self) -> str:
        """The event as SSE text."""
        data = encode_frame(self.data)  # the socket's text rule: UTF-8, never fails
        if self.id is None:
            return f"data: {data}\n\n"
        return f"id: {self.id}\ndata: {data}\n\n"


def encode_events(events: Iterable[SseEvent]) -> str:
    """Several events as SSE text, in order."""
    return "".join(event.encode() for event in events)
