"""A WebSocket client written on a bare TCP socket, for what a polite client never does.

``websockets`` (``servers.Client``) always reads and always finishes the closing
handshake. The clients here do what a closing tab or a stuck one does to the server:

- a frame and a close frame in one write, then nothing read (a tab closed right after a
  click, while the server still had frames queued for it): the server's transport cannot
  finish closing until its buffer drains, so its next send on that socket fails
  (autobahn's ``Disconnected``) before the server learns the socket is gone;
- a socket whose receive buffer is tiny (``receive_buffer``) and never drained, so
  everything the server sends it piles up in the server's transport buffer.

Only the handshake and client frames (masked, as RFC 6455 requires) are written here;
``close_code`` reads what the server sent, at the end, to find its close frame.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
from typing import Any

#: How long a test waits for the server to do what it must (a hang turns into a failure).
TIMEOUT_S = 30


def handshake(host: str, port: int, path: str, cookie: str | None) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        f"Origin: http://{host}:{port}",
    ]
    if cookie:
        lines.append(f"Cookie: {cookie}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One masked, final frame (``0x1`` text, ``0x8`` close)."""
    mask = os.urandom(4)
    length = len(payload)
    if length < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
    elif length < 2**16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    return head + mask + masked


def text_frame(frame: dict[str, Any]) -> bytes:
    return client_frame(0x1, json.dumps(frame).encode())


def close_frame(code: int = 1001) -> bytes:
    return client_frame(0x8, struct.pack("!H", code))


async def handshake_status(port: int, path: str, cookie: str | None = None) -> str:
    """The status line a websocket handshake on ``path`` is answered with."""

    def ask() -> str:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
            sock.sendall(handshake("127.0.0.1", port, path, cookie))
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.split(b"\r\n", 1)[0].decode("latin-1")

    return await asyncio.to_thread(ask)


class RawSocket:
    """One handshaken connection on a plain socket (blocking calls run in a thread)."""

    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self.sock = sock
        #: What arrived after the handshake's headers (the start of the frames).
        self.received = rest

    @classmethod
    async def open(
        cls,
        port: int,
        session_id: str,
        cookie: str | None,
        *,
        receive_buffer: int | None = None,
        path: str | None = None,
    ) -> RawSocket:
        """Connect and handshake; ``receive_buffer`` shrinks the socket's receive buffer."""

        def connect() -> RawSocket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if receive_buffer is not None:
                # Set before connecting, so the window the server sees is small from the start.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            sock.settimeout(TIMEOUT_S)
            sock.connect(("127.0.0.1", port))
            sock.sendall(
                handshake("127.0.0.1", port, path or f"/ws/sessions/{session_id}/", cookie)
            )
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(1)  # byte by byte: nothing past the headers is taken
                if not chunk:
                    raise ConnectionError(f"the server closed the handshake: {data!r}")
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            if b" 101 " not in head.split(b"\r\n", 1)[0]:
                raise ConnectionError(f"handshake refused: {head!r}")
            return cls(sock, rest)

        return await asyncio.to_thread(connect)

    async def send_frames(self, *frames: bytes) -> None:
        """Write the frames in one ``sendall``: the server reads them together."""
        await asyncio.to_thread(self.sock.sendall, b"".join(frames))

    async def first_byte(self) -> None:
        """Wait until the server has started writing frames here (reads one byte only)."""
        if self.received:
            return

        def read() -> None:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("the server closed the socket")
            self.received += chunk

        await asyncio.to_thread(read)

    async def drain_to_end(self) -> tuple[bytes, str]:
        """Read until the server ends the connection: ``(all bytes read, how it ended)``.

        ``closed`` (the server closed or reset it) or ``timeout`` (it stayed open, silent,
        for ``TIMEOUT_S``).
        """

        def drain() -> tuple[bytes, str]:
            while True:
                try:
                    chunk = self.sock.recv(65536)
                except ConnectionResetError:
                    return self.received, "closed"
                except TimeoutError:
                    return self.received, "timeout"
                if not chunk:
                    return self.received, "closed"
                self.received += chunk

        return await asyncio.to_thread(drain)

    def close(self) -> None:
        self.sock.close()


def server_frames(data: bytes) -> list[tuple[int, bytes]]:
    """``(opcode, payload)`` of each whole unmasked server frame in ``data``."""
    frames = []
    index = 0
    while index + 2 <= len(data):
        first, second = data[index], data[index + 1]
        length = second & 0x7F
        index += 2
        if length == 126:
            if index + 2 > len(data):
                break
            (length,) = struct.unpack("!H", data[index : index + 2])
            index += 2
        elif length == 127:
            if index + 8 > len(data):
                break
            (length,) = struct.unpack("!Q", data[index : index + 8])
            index += 8
        if index + length > len(data):
            break
        frames.append((first & 0x0F, data[index : index + length]))
        index += length
    return frames


def close_code(data: bytes) -> int | None:
    """The code of the close frame among the server's frames in ``data``, if any."""
    for opcode, payload in server_frames(data):
        if opcode == 0x8 and len(payload) >= 2:
            return struct.unpack("!H", payload[:2])[0]
    return None
