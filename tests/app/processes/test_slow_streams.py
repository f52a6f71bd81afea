"""Event streams that never read, against a real daphne process: what they cost is bounded.

A chat answers 8 MB. First with one reading client (the server's memory after it is the
baseline), then again with 20 more re-attached streams whose clients never read (plain
sockets with a tiny receive buffer; the server's sockets have a small kernel send buffer,
``ZETT_TEST_SEND_BUFFER``, so what is unread stays in the server's own transport, as on a
busy link). Each of the 20 is dropped once it leaves more than ``ZETT_WS_SEND_BUFFER_BYTES``
unread (the server resets its connection); the peak memory of the second answer is within
20 caps of the baseline; a dropped client re-attaches and gets the rest of the answer; and
once everything has ended the memory is back near the baseline.
"""

from __future__ import annotations

import asyncio
import select
import socket
import uuid
from collections.abc import Iterator

import pytest

from tests.app.processes.test_agui_processes import make_token
from tests.app.processes.test_request_refusals import MODEL, reattach, rss_kib, start_run
from tests.app.servers import DaphneProcess, fresh_database, migrate, server_env
from tests.app.sse_client import collect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ANSWER_BYTES = 8 * 1024 * 1024
STREAMS = 20
#: The send buffer cap of the test server (a quarter of the default, so that 20 caps are
#: small beside the 8 MB answer each silent stream would otherwise hold).
CAP = 256 * 1024
MIB = 1024
#: What a run of the answer may leave in the process besides the streams: the allocator
#: keeps some of a run's memory, and a run's peak varies (measured, with the streams:
#: 12 to 28 MB over the baseline; without the cap they held 1.8 times the answer each).
SLACK_KIB = 32 * MIB


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[DaphneProcess, str]]:
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(
            url,
            ZETT_MODEL=MODEL,
            ZETT_WS_SEND_BUFFER_BYTES=str(CAP),
            ZETT_TEST_SEND_BUFFER="65536",
            ZETT_WS_MAX_SOCKETS_PER_SESSION="40",
            ZETT_WS_MAX_SOCKETS_PER_PERSON="80",
            ZETT_WS_RATE_BURST="200",
            MALLOC_ARENA_MAX="2",
            DJANGO_DEBUG="0",
        )
        migrate(env)
        process = DaphneProcess("slow-streams", env, migrate=False).start()
        try:
            yield process, make_token(env, "ada")
        finally:
            process.stop()


def peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def reset_peak(pid: int) -> None:
    with open(f"/proc/{pid}/clear_refs", "w") as clear:
        clear.write("5")  # the peak RSS starts again from the current RSS


def silent_stream(port: int, secret: str, thread_id: str, last_id: int) -> socket.socket:
    """A re-attachment whose client never reads (its receive window stays tiny)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        (
            f"GET /api/ag-ui/threads/{thread_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {secret}\r\nLast-Event-ID: {last_id}\r\n\r\n"
        ).encode()
    )
    return sock


def dropped(sock: socket.socket, timeout_s: float = 60) -> bool:
    """Whether the server drops the connection (resets it) within ``timeout_s``, read
    nothing. A stream that ends as usual is closed in order (no reset): not dropped."""
    poller = select.poll()
    poller.register(sock, select.POLLERR | select.POLLHUP | select.POLLRDHUP)
    reset = select.POLLERR | select.POLLHUP
    return any(events & reset for _, events in poller.poll(int(timeout_s * 1000)))


async def answer_with_silent_streams(
    process: DaphneProcess, secret: str, count: int, answer: str
) -> tuple[str, int, asyncio.Task]:
    """Start the answer in a new chat, read by one client; once it streams, ``count``
    silent re-attachments, each awaited until the server drops it. The chat, the id the
    silent ones re-attached after, and the reading client's task."""
    thread_id = str(uuid.uuid4())
    posted = await start_run(process, secret, thread_id, answer)
    first = await collect(posted, until=lambda e: e.type == "TEXT_MESSAGE_CONTENT")
    reader = asyncio.create_task(collect(posted))
    silent = [
        await asyncio.to_thread(silent_stream, process.port, secret, thread_id, first[-1].id)
        for _ in range(count)
    ]
    drops = await asyncio.gather(*(asyncio.to_thread(dropped, sock) for sock in silent))
    for sock in silent:
        sock.close()
    assert all(drops), f"{drops.count(False)} of {count} silent streams were not dropped"
    return thread_id, first[-1].id, reader


async def test_streams_that_never_read_are_dropped_and_their_memory_is_bounded(server):
    process, secret = server
    pid = process.process.pid
    answer = f"big {ANSWER_BYTES} 0.005"
    # The baseline: the same answer, read by its one client (after two such answers,
    # which warm the process up).
    for _ in range(3):
        reset_peak(pid)
        *_, reader = await answer_with_silent_streams(process, secret, 0, answer)
        assert (await reader)[-1].type == "RUN_FINISHED"
    baseline_peak, baseline = peak_kib(pid), rss_kib(pid)

    reset_peak(pid)
    *_, reader = await answer_with_silent_streams(process, secret, STREAMS, answer)
    assert (await reader)[-1].type == "RUN_FINISHED"
    grown = peak_kib(pid) - baseline_peak
    after = rss_kib(pid) - baseline
    print(f"{STREAMS} silent streams: peak {grown} KiB over the baseline's, then {after} KiB")
    assert grown < STREAMS * CAP // 1024 + SLACK_KIB, f"peak {grown} KiB over the baseline's"
    assert after < STREAMS * CAP // 1024 + SLACK_KIB, f"{after} KiB more than the baseline"
    assert process.log().count("it does not read") == STREAMS

    # A dropped client re-attaches (reading, now) and gets the rest of the run.
    thread_id, last_id, reader = await answer_with_silent_streams(process, secret, 1, answer)
    again = await reattach(process, secret, thread_id, last_id)
    assert again.status == 200
    assert (await collect(again))[-1].type == "RUN_FINISHED"
    assert (await reader)[-1].type == "RUN_FINISHED"
    assert "Traceback" not in process.log()
