"""A plain HTTP/1.1 client over a TCP socket, for real servers: requests, streamed bodies.

``open_request`` sends one request and reads the status line and headers; ``body()``
then yields the body as it arrives (chunked or not, de-chunked here), so an SSE stream is
read while the server produces it, and ``abort()`` drops the connection mid-stream the way
a lost link does. ``fetch`` is the same as ``ag-ui-validate``'s ``fetch_impl``, so the
validator's live rules (timing, keep-alive) run against a real server. Every read has a
timeout that only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ag_ui_validate.transport import TransportResponseLike

READ_TIMEOUT = 60


@dataclass
class Event:
    id: int | None
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return self.data["type"]


@dataclass(eq=False)
class Response:
    status: int
    headers: dict[str, str]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    raw: list[bytes] = field(default_factory=list)
    _done: bool = False

    async def body(self) -> AsyncIterator[bytes]:
        """The body, a piece at a time as it arrives."""
        chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        length = self.headers.get("content-length")
        try:
            if chunked:
                while True:
                    size_line = await self._read(self.reader.readline())
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        await self._read(self.reader.readline())
                        return
                    piece = await self._read(self.reader.readexactly(size + 2))
                    self.raw.append(piece[:-2])
                    yield piece[:-2]
            elif length is not None:
                piece = await self._read(self.reader.readexactly(int(length)))
                self.raw.append(piece)
                yield piece
            else:
                while piece := await self._read(self.reader.read(65536)):
                    self.raw.append(piece)
                    yield piece
        finally:
            self._done = True

    async def _read(self, awaitable: Any) -> Any:
        return await asyncio.wait_for(awaitable, READ_TIMEOUT)

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.body()])

    async def json(self) -> Any:
        data = json.loads(await self.read())
        await self.close()
        return data

    async def events(self) -> AsyncIterator[Event]:
        """The SSE events of the body (comments skipped)."""
        buffer = ""
        async for piece in self.body():
            buffer += piece.decode("utf-8")
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                event_id, data = None, None
                for line in block.split("\n"):
                    if line.startswith("id: "):
                        event_id = int(line[4:])
                    elif line.startswith("data: "):
                        data = json.loads(line[6:])
                if data is not None:
                    yield Event(event_id, data)

    def text(self) -> str:
        return b"".join(self.raw).decode("utf-8")

    def abort(self) -> None:
        """Drop the connection at once (no orderly close): a lost link."""
        transport = self.writer.transport
        transport.abort()

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def open_request(
    port: int, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> Response:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body or method in ("POST", "PUT", "DELETE"):
        lines.append(f"Content-Length: {len(body)}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT)
    status = int(status_line.split()[1])
    found: dict[str, str] = {}
    while True:
        line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        found[name.strip().lower()] = value.strip()
    return Response(status, found, reader, writer)


async def collect(response: Response, until=None) -> list[Event]:
    """Events up to the one ``until`` matches (None: the stream's end)."""
    got = []
    async for event in response.events():
        got.append(event)
        if until is not None and until(event):
            return got
    await response.close()
    return got


def fetcher(port: int):
    """An ``ag-ui-validate`` ``fetch_impl`` for the server on ``port``."""

    async def fetch(url: str, *, method: str, headers: dict, body: bytes | None, timeout_s=None):
        path = url.split(str(port), 1)[1]
        response = await open_request(port, method, path, headers, body or b"")
        return TransportResponseLike(
            status=response.status, headers=response.headers, body=response.body()
        )

    return fetch
