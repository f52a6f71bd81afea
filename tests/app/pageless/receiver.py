"""A real HTTP server on 127.0.0.1 that receives webhooks, for the tests.

``Receiver`` answers each POST with the next status of ``statuses`` (then 200), keeps
every request (headers lower-cased, the body's bytes) and lets a test await the
``n``-th one. It speaks just enough HTTP/1.1 for one request per connection.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    path: str


@dataclass
class Receiver:
    statuses: list[int] = field(default_factory=list)
    #: Never answer (until the receiver closes): a receiver that hangs.
    hang: bool = False
    requests: list[Received] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/zett?src=test"

    async def __aenter__(self) -> Receiver:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._closing.set()
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if self.hang:
                async with self._arrived:
                    self.requests.append(Received(headers, body, ""))
                    self._arrived.notify_all()
                await self._closing.wait()
                return
            status = self.statuses.pop(0) if self.statuses else 200
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n".encode())
            await writer.drain()
            path = request_line.split()[1].decode()
            async with self._arrived:
                self.requests.append(Received(headers, body, path))
                self._arrived.notify_all()
        finally:
            writer.close()

    async def wait_for(self, count: int, within: float = 10.0) -> list[Received]:
        """The first ``count`` requests, once they have arrived."""
        async with asyncio.timeout(within), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)
        return self.requests[:count]
