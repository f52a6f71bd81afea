"""An HTTP client that drives the real ASGI application in-process, chunk by chunk.

``HttpCall`` sends one request to ``zett_site.asgi.application`` (every middleware, the URL
router, the view) and hands out the response body as the application sends it, so a test
sees a stream while it is produced, can stop reading in the middle, and can hang up
(``disconnect``: the ``http.disconnect`` a server sends when the client goes away). Every
wait has a timeout that only turns a hang into a failure. ``SseReader`` splits the body
into Server-Sent Events (``id``, ``data`` as JSON) and keep-alive comments.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

RECEIVE_TIMEOUT = 10


@dataclass
class Sse:
    """One Server-Sent Event: its ``id`` (None without one) and its JSON ``data``."""

    id: int | None
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return self.data["type"]


class HttpCall:
    """One request to an ASGI application, its response read as it comes."""

    def __init__(
        self,
        app: Any,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | str = b"",
    ) -> None:
        parts = urlsplit(url)
        self.body = body.encode() if isinstance(body, str) else body
        raw_headers = [(b"host", b"testserver")]
        raw_headers += [
            (k.lower().encode(), v.encode("latin-1")) for k, v in (headers or {}).items()
        ]
        if self.body:
            raw_headers.append((b"content-length", str(len(self.body)).encode()))
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": parts.path,
            "raw_path": parts.path.encode(),
            "query_string": parts.query.encode(),
            "root_path": "",
            "headers": raw_headers,
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        self.app = app
        self.status = 0
        self.headers: dict[str, str] = {}
        self._sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._hang_up = asyncio.Event()
        self._requested = False
        self._task: asyncio.Task[None] | None = None
        self.finished = False

    async def _receive(self) -> dict[str, Any]:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._hang_up.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        await self._sent.put(message)

    async def start(self) -> HttpCall:
        """Send the request; return once the response's status and headers came."""
        self._task = asyncio.create_task(self.app(self.scope, self._receive, self._send))
        start = await self._next()
        assert start["type"] == "http.response.start", start
        self.status = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start.get("headers", [])}
        return self

    async def _next(self) -> dict[str, Any]:
        getter = asyncio.ensure_future(self._sent.get())
        done, _ = await asyncio.wait(
            [getter, self._task], timeout=RECEIVE_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        if getter in done:
            return getter.result()
        getter.cancel()
        if self._task in done:
            self._task.result()  # raise what the application raised
            raise AssertionError("the application ended without sending a response")
        raise AssertionError(f"no response message within {RECEIVE_TIMEOUT}s")

    async def chunk(self) -> bytes | None:
        """The next body chunk; None once the body is complete."""
        if self.finished:
            return None
        message = await self._next()
        assert message["type"] == "http.response.body", message
        if not message.get("more_body", False):
            self.finished = True
        return message.get("body", b"")

    async def read(self) -> bytes:
        """The rest of the body."""
        parts = []
        while (part := await self.chunk()) is not None:
            parts.append(part)
        await self.wait_closed()
        return b"".join(parts)

    async def json(self) -> Any:
        return json.loads(await self.read())

    async def disconnect(self) -> None:
        """Hang up, and wait until the application has let go of the request."""
        self._hang_up.set()
        await self.wait_closed()

    async def wait_closed(self) -> None:
        if self._task is not None:
            await asyncio.wait_for(asyncio.shield(self._task), RECEIVE_TIMEOUT)


@dataclass
class SseReader:
    """Reads Server-Sent Events from an ``HttpCall``."""

    call: HttpCall
    events: list[Sse] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    _buffer: str = ""

    async def next(self) -> Sse | None:
        """The next event (comments are recorded and skipped); None at the body's end."""
        while "\n\n" not in self._buffer:
            chunk = await self.call.chunk()
            if chunk is None:
                return None
            text = chunk.decode("utf-8")
            self.raw.append(text)
            self._buffer += text
        block, self._buffer = self._buffer.split("\n\n", 1)
        event_id, data = None, None
        for line in block.split("\n"):
            if line.startswith(":"):
                self.comments.append(line)
            elif line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if data is None:
            return await self.next()
        event = Sse(event_id, data)
        self.events.append(event)
        return event

    async def until(self, match) -> list[Sse]:
        got = []
        while True:
            event = await self.next()
            if event is None:
                raise AssertionError(f"the stream ended before the event expected: {got}")
            got.append(event)
            if match(event):
                return got

    async def rest(self) -> list[Sse]:
        got = []
        while (event := await self.next()) is not None:
            got.append(event)
        await self.call.wait_closed()
        return got

    def text(self) -> str:
        return "".join(self.raw)
