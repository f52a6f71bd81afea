"""Nothing a person typed or approved is lost, under the races that used to lose it.

200 sessions each send a message and cancel it at once; 200 more approve a note and close
their socket at once; ten at a time, through the real ASGI app and the offline demo model.
Afterwards every typed message is stored, and every note the approved tool wrote has the
conversation rows that explain it (the call, its result, the answer).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agent_app.models import ChatMessage, ChatRun
from tests.progress import say
from zett_site.models import Note

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

SESSIONS = 200
AT_ONCE = 10


async def in_batches(make, count: int, request: pytest.FixtureRequest) -> None:
    for start in range(0, count, AT_ONCE):
        await asyncio.gather(*(make(index) for index in range(start, start + AT_ONCE)))
        if (start + AT_ONCE) % (count // 4) == 0:
            say(request, f"{request.node.name}: {start + AT_ONCE} of {count} sessions")


@pytest.fixture(autouse=True)
def many_chats_for_one_browser(settings):
    """The test's sockets are one browser: let it start all of these chats at once."""
    settings.ZETT_MAX_CHATS_PER_HOUR = 10 * SESSIONS
    settings.ZETT_WS_RATE_LIMIT = {"burst": 10 * SESSIONS, "per_second": 1000.0}


async def test_a_message_cancelled_at_once_is_never_lost(sockets, settings, request):
    settings.ZETT_MODEL = "demo"
    settings.ZETT_DEMO_PACE = 0.01

    async def send_and_cancel(index: int) -> None:
        socket = await sockets(str(uuid.uuid4()))
        await socket.send({"type": "user_message", "content": f"message {index}"})
        await socket.send({"type": "cancel"})
        await socket.until(lambda f: f["type"] in ("run_cancelled", "error"))
        await socket.close()

    await in_batches(send_and_cancel, SESSIONS, request)
    stored = {m.content async for m in ChatMessage.objects.filter(role="user")}
    assert stored == {f"message {index}" for index in range(SESSIONS)}
    statuses = {run.status async for run in ChatRun.objects.all()}
    assert statuses <= {"cancelled", "completed"}


async def test_an_approval_followed_by_closing_the_socket_keeps_the_whole_exchange(
    sockets, settings, request
):
    settings.ZETT_MODEL = "demo"
    settings.ZETT_DEMO_PACE = 0

    async def approve_and_leave(index: int) -> str:
        socket = await sockets(str(uuid.uuid4()))
        await socket.send({"type": "user_message", "content": f"save a note: item {index}"})
        frames = await socket.until_event("custom", "approval_requested")
        call_id = frames[-1]["event"]["payload"]["tool_call_id"]
        approval = {"tool_call_id": call_id, "approved": True}
        await socket.send(
            {"type": "external_event", "name": "approval_response", "payload": approval}
        )
        await socket.close()
        return socket.session_id

    session_ids: list[str] = []

    async def record(index: int) -> None:
        session_ids.append(await approve_and_leave(index))

    await in_batches(record, SESSIONS, request)
    # The runs go on without their sockets: wait for each to end.
    from agent_app.sessions.registry import live_sessions

    for live in live_sessions():
        await live.wait_for_run()
    notes = [note async for note in Note.objects.all()]
    assert len(notes) == SESSIONS
    for note in notes:
        rows = [
            (m.role, m.name)
            async for m in ChatMessage.objects.filter(session_id=note.session_id).order_by(
                "position"
            )
        ]
        assert ("tool", "save_note") in rows, rows
        assert rows[0][0] == "user" and rows[-1][0] == "assistant"
