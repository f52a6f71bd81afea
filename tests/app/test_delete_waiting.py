"""Deleting a chat whose run waits for its person (from the list, which has no Stop): the
wait is closed as cancelled, the run recorded as cancelled, then the chat is deleted and
its sockets told. A run that is still working is not deleted under it (409)."""

from __future__ import annotations

import json

import pytest

from agent_app.models import ChatRun, ChatSession, ReplyWait, WaitStatus
from tests.app.asgi_http import HttpCall
from tests.app.llm_doubles import SteppedModel, call_tool, say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)

CSRF = "a" * 32


async def post_delete(socket_cookie: str, session_id: str):
    """POST the list's Delete (the page script's JSON request) to the real ASGI app."""
    from zett_site.asgi import application

    headers = {
        "Cookie": f"{socket_cookie}; csrftoken={CSRF}",
        "X-CSRFToken": CSRF,
        "Accept": "application/json",
        "Origin": "http://testserver",
    }
    call = await HttpCall(application, "POST", f"/s/{session_id}/delete/", headers=headers).start()
    try:
        return call.status, json.loads(await call.read())
    finally:
        await call.disconnect()


async def test_a_chat_waiting_for_its_person_is_stopped_then_deleted(
    sockets, use_model, browser_cookie
):
    ask = call_tool("ask_user", "ask-1", question="Which one?", options=["a", "b"])
    use_model(ScriptedModel([ask, say("Never said.")]))
    cookie = await browser_cookie()
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Ask me"})
    await socket.until_event("custom", "ask_user")
    wait = await ReplyWait.objects.aget(session_id=socket.session_id)
    assert wait.status == WaitStatus.OPEN

    status, body = await post_delete(cookie, socket.session_id)

    assert status == 200 and body["deleted"] is True
    await socket.expect("run_cancelled")
    assert not await ChatSession.objects.filter(pk=socket.session_id).aexists()
    assert not await ChatRun.objects.filter(session_id=socket.session_id).aexists()


async def test_a_working_run_is_not_deleted_under_it(sockets, use_model, browser_cookie):
    model = use_model(SteppedModel(["one ", "two"]))
    cookie = await browser_cookie()
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Go"})
    await socket.expect("run_started")
    status, body = await post_delete(cookie, socket.session_id)
    assert status == 409 and "Stop it first" in body["error"]
    model.finish()
    await socket.run_to_completion()
    assert await ChatSession.objects.filter(pk=socket.session_id).aexists()


async def test_the_list_and_the_confirmation_page_say_the_wait_is_cancelled_first(
    sockets, use_model, browser_cookie
):
    from asgiref.sync import sync_to_async
    from django.test import Client

    ask = call_tool("ask_user", "ask-1", question="Which one?", options=["a", "b"])
    use_model(ScriptedModel([ask, say("Never said.")]))
    cookie = await browser_cookie()
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Ask me"})
    await socket.until_event("custom", "ask_user")
    client = Client()
    client.cookies["sessionid"] = cookie.split("=", 1)[1]
    listing = (await sync_to_async(client.get)("/")).content.decode()
    assert "data-waiting" in listing
    page = await sync_to_async(client.get)(f"/s/{socket.session_id}/delete/")
    assert "the question is cancelled and the answer stopped first" in page.content.decode()
    await socket.send({"type": "cancel"})
    await socket.expect("run_cancelled")
    listing = (await sync_to_async(client.get)("/")).content.decode()
    assert "data-waiting" not in listing
