"""One webhook attempt: an HTTP/1.1 POST to the address that was checked.

Written on asyncio's streams rather than an HTTP library so that the connection goes to
exactly the address ``agent_app.models.addresses.resolve`` allowed (a library would look
the name up again, and a name that answers a public address to the check and a private
one to the connection would get through), with TLS still verified against the host's
name. The whole attempt — connecting, sending, the status line and headers — has one
deadline. Redirects are not followed (a 3xx is a failed attempt), the answer's body is not
read, and the connection is closed after each attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass

from agent_app.models.addresses import Target, UnsafeURL, resolve, target_of

__all__ = ["Answer", "post"]

USER_AGENT = "zett-webhooks/1"
#: Most bytes of a status line and headers read from a receiver.
MAX_HEAD_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Answer:
    """How an attempt went: the HTTP status (None: no answer) or why it failed."""

    status: int | None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


async def post(url: str, headers: dict[str, str], body: bytes, *, seconds: float) -> Answer:
    """POST ``body`` to ``url`` with ``headers``; never raises (but ``CancelledError``)."""
    try:
        target = target_of(url)
        async with asyncio.timeout(seconds):
            addresses = await resolve(target)
            return await _exchange(target, [str(address) for address in addresses], headers, body)
    except UnsafeURL as unsafe:
        return Answer(None, str(unsafe))
    except TimeoutError:
        return Answer(None, f"No answer within {seconds:g} s")
    except (OSError, ssl.SSLError, ValueError, asyncio.IncompleteReadError) as failed:
        return Answer(None, f"{type(failed).__name__}: {failed}"[:500])


async def _connect(
    target: Target, addresses: list[str]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    context = ssl.create_default_context() if target.scheme == "https" else None
    failure: OSError | None = None
    for address in addresses:
        try:
            return await asyncio.open_connection(
                address,
                target.port,
                ssl=context,
                server_hostname=target.host if context is not None else None,
            )
        except OSError as failed:
            failure = failed
    assert failure is not None
    raise failure


async def _exchange(
    target: Target, addresses: list[str], headers: dict[str, str], body: bytes
) -> Answer:
    reader, writer = await _connect(target, addresses)
    try:
        writer.write(_request(target, headers, body))
        await writer.drain()
        status = _status(await reader.readline())
        read = 0
        while True:  # the headers, up to the blank line (not kept)
            line = await reader.readline()
            read += len(line)
            if line in (b"\r\n", b"\n", b"") or read > MAX_HEAD_BYTES:
                break
        if 300 <= status < 400:
            return Answer(status, f"Answered {status}: redirects are not followed")
        if not 200 <= status < 300:
            return Answer(status, f"Answered {status}")
        return Answer(status)
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


def _request(target: Target, headers: dict[str, str], body: bytes) -> bytes:
    host = f"[{target.host}]" if ":" in target.host else target.host
    default = 443 if target.scheme == "https" else 80
    if target.port != default:
        host = f"{host}:{target.port}"
    lines = [
        f"POST {target.path} HTTP/1.1",
        f"Host: {host}",
        f"User-Agent: {USER_AGENT}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _status(line: bytes) -> int:
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ValueError(f"Not an HTTP answer: {line[:80]!r}")
    return int(parts[1])
