"""A deleted chat stays deleted, and the chats-per-hour quota counts chats created.

Through the real ASGI application: a chat deleted on its page closes its other sockets
(``forbidden``, close code 4410); one deleted where this process's sockets could not be
told (another process: here, a thread with no event loop of its own sockets) is not
stored again by the next message of a tab still open on it; and deleting chats gives no
quota back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from agent_app.consumers import DELETED_CLOSE_CODE
from agent_app.models import ChatCreation, ChatSession
from tests.app.conftest import new_browser_cookie
from tests.app.llm_doubles import say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _generous_frame_budget(settings):
    settings.ZETT_WS_RATE_LIMIT = {"burst": 100_000, "per_second": 100_000.0}


async def a_stored_chat(sockets, use_model, session_id: str, cookie: str) -> list:
    use_model(ScriptedModel([say("hello"), say("again"), say("more")]))
    first = await sockets(session_id, cookie=cookie)
    second = await sockets(session_id, cookie=cookie)
    await first.send({"type": "user_message", "content": "hi"})
    await first.run_to_completion()
    await second.run_to_completion()
    return [first, second]


async def elsewhere(work) -> None:
    """Run ``work`` in a new thread that knows nothing of this event loop: another process."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:
            failed.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    await asyncio.to_thread(thread.join)
    if failed:
        raise failed[0]


async def closed_with(socket, code: int) -> dict:
    error = await socket.expect("error", code="forbidden")
    assert "deleted" in error["message"]
    output = await socket.communicator.receive_output(timeout=10)
    assert output == {"type": "websocket.close", "code": code}
    return error


def delete_on_its_page(cookie: str, session_id: str) -> int:
    client = Client()
    client.cookies.load(cookie)
    response = client.post(
        reverse("agent_app:delete", kwargs={"session_id": session_id}),
        HTTP_ACCEPT="application/json",
    )
    return response.status_code


async def test_deleting_a_chat_tells_and_closes_its_other_sockets(sockets, use_model):
    session_id, cookie = str(uuid.uuid4()), await new_browser_cookie()
    first, second = await a_stored_chat(sockets, use_model, session_id, cookie)
    status = await sync_to_async(delete_on_its_page)(cookie, session_id)
    assert status == 200
    await closed_with(first, DELETED_CLOSE_CODE)
    await closed_with(second, DELETED_CLOSE_CODE)
    assert not await ChatSession.objects.filter(pk=session_id).aexists()
    # Opening it again is refused the same way: it does not come back as an empty chat.
    again = await sockets(session_id, cookie=cookie, expect_session=False)
    await closed_with(again, DELETED_CLOSE_CODE)


async def test_a_tab_left_open_on_a_chat_deleted_elsewhere_does_not_bring_it_back(
    sockets, use_model
):
    session_id, cookie = str(uuid.uuid4()), await new_browser_cookie()
    first, _ = await a_stored_chat(sockets, use_model, session_id, cookie)

    def delete_elsewhere() -> None:  # no event loop here: like another process
        ChatSession.objects.filter(pk=session_id).delete()

    await elsewhere(delete_elsewhere)
    await first.send({"type": "user_message", "content": "are you there?"})
    await closed_with(first, DELETED_CLOSE_CODE)
    assert not await ChatSession.objects.filter(pk=session_id).aexists()


async def test_deleting_chats_gives_no_quota_back(sockets, use_model, settings):
    settings.ZETT_MAX_CHATS_PER_HOUR = 2
    use_model(ScriptedModel([say("one"), say("two"), say("three")]))
    cookie = await new_browser_cookie()
    for _ in range(2):
        session_id = str(uuid.uuid4())
        socket = await sockets(session_id, cookie=cookie)
        await socket.send({"type": "user_message", "content": "hi"})
        await socket.run_to_completion()
        await socket.close()
        assert await sync_to_async(delete_on_its_page)(cookie, session_id) == 200
    assert await ChatCreation.objects.acount() == 2
    third = await sockets(str(uuid.uuid4()), cookie=cookie)
    await third.send({"type": "user_message", "content": "hi"})
    await third.expect_error("rate_limited")


@pytest.mark.parametrize("stored", [False, True], ids=["new chat", "stored chat"])
async def test_a_socket_of_a_user_deleted_elsewhere_closes_cleanly_at_its_next_run(
    sockets, use_model, caplog, stored
):
    from django.contrib.auth import get_user_model
    from django.db.models.signals import post_delete

    from agent_app.guard.access import close_deleted_users_sockets

    use_model(ScriptedModel([say("hello"), say("again")]))
    users = get_user_model()
    user = await sync_to_async(users.objects.create_user)("ada", password="pw-1234567")
    tab = Client()
    await sync_to_async(tab.force_login)(user)
    socket = await sockets(cookie=f"sessionid={tab.cookies['sessionid'].value}")
    if stored:
        await socket.send({"type": "user_message", "content": "hi"})
        await socket.run_to_completion()

    def delete_elsewhere() -> None:
        # Another process, with the in-memory layer: its sign-out message reaches nobody.
        post_delete.disconnect(sender=users, dispatch_uid="zett.close_deleted_user")
        try:
            users.objects.filter(pk=user.pk).delete()
        finally:
            post_delete.connect(
                close_deleted_users_sockets,
                sender=users,
                dispatch_uid="zett.close_deleted_user",
            )

    await elsewhere(delete_elsewhere)
    await socket.send({"type": "user_message", "content": "still there?"})
    error = await socket.expect_error("forbidden")
    closing = await socket.communicator.receive_output(timeout=10)
    if stored:
        # Its chat went with the user: closed as deleted (told at once, or at this message).
        assert closing["code"] in (4403, DELETED_CLOSE_CODE)
    else:
        assert "account" in error["message"]
        assert closing == {"type": "websocket.close", "code": 4403}
    assert not await ChatSession.objects.aexists()
    assert [r for r in caplog.records if r.levelno > logging.INFO] == []
