"""A scripted HTTP/1.1 server on 127.0.0.1 that replays provider responses to the real SDKs.

Tests queue one ``Reply`` per expected request; the server records every request it gets and
answers with the next reply: a JSON error, or a server-sent-event stream written chunk by
chunk. A reply may ``hold`` the connection open after its chunks; the server then waits for
the client to go away and sets ``disconnected``, which cancellation tests await. Each
response is sent with ``Connection: close``, so every attempt of a client is a new
connection and the request log maps one-to-one onto attempts.
"""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

__all__ = ["FakeServer", "RecordedRequest", "Reply", "sse", "unused_port"]


def unused_port() -> int:
    """A local port with no listener: it was free a moment ago, and nothing opened it since."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def sse(data: Any, *, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """What the server answers to one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    #: A complete body (JSON-encoded unless bytes); None means an event stream of ``chunks``.
    body: Any = None
    chunks: list[bytes] = field(default_factory=list)
    #: Keep the stream open after the chunks until the client disconnects.
    hold: bool = False

    @classmethod
    def stream(cls, chunks: list[bytes], *, hold: bool = False) -> Reply:
        return cls(headers={"Content-Type": "text/event-stream"}, chunks=chunks, hold=hold)

    @classmethod
    def error(cls, status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
        return cls(status=status, body=body, headers=dict(headers or {}))


class FakeServer:
    """Serves inside ``async with FakeServer() as server:`` (or between ``start`` and ``stop``)."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.replies: list[Reply] = []
        #: Set when a client closes a held stream.
        self.disconnected = asyncio.Event()
        #: Set when a held stream has written all its chunks.
        self.holding = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reply(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def __aenter__(self) -> FakeServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            request = await self._read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            reply = (
                self.replies.pop(0)
                if self.replies
                else Reply.error(
                    599, {"error": {"message": f"fake server has no reply for {request.path}"}}
                )
            )
            await self._send(reply, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.disconnected.set()
        finally:
            writer.close()
            self._handlers.discard(task)

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return RecordedRequest(method, path, headers, body)

    async def _send(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            reason = HTTPStatus(reply.status).phrase
        except ValueError:
            reason = "Unknown"
        headers = {"Connection": "close", **reply.headers}
        body = None
        if reply.body is not None:
            body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            headers.setdefault("Content-Type", "application/json")
            headers["Content-Length"] = str(len(body))
        head = f"HTTP/1.1 {reply.status} {reason}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
        writer.write(head.encode("latin-1"))
        if body is not None:
            writer.write(body)
            await writer.drain()
            return
        for chunk in reply.chunks:
            writer.write(chunk)
            await writer.drain()
        if reply.hold:
            self.holding.set()
            # The client sends nothing more; reading returns b"" once it has closed.
            while await reader.read(1024):
                pass
            self.disconnected.set()
