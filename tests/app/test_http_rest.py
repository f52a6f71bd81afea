"""The JSON API for programs (agent_app.api.rest), through the real ASGI application.

A token's user lists their chats, pages a chat's history, cancels a running answer (the
AG-UI stream of that run ends ``cancelled``) and deletes a chat; nobody else's chat exists
for them, and a cookie request that changes something needs its CSRF token.
"""

from __future__ import annotations

import uuid

import pytest

from agent_app.models import ChatSession
from tests.app.agui_support import (  # noqa: F401 (the ``http`` fixture)
    bearer,
    body_of,
    http_fixture,
    make_token,
    post_run,
    run_input,
)
from tests.app.asgi_http import SseReader
from tests.app.llm_doubles import SteppedModel, say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


async def get_json(http, url: str, secret: str) -> tuple[int, dict]:
    call = await http("GET", url, headers=bearer(secret))
    return call.status, await call.json()


async def test_a_program_lists_its_chats_and_pages_their_history(http, use_model):
    use_model(ScriptedModel([say("First answer."), say("Second answer."), say("Third.")]))
    _, secret = await make_token("ada")
    _, other = await make_token("bob")
    older, newer = str(uuid.uuid4()), str(uuid.uuid4())
    await SseReader(await post_run(http, secret, run_input(older, "one"))).rest()
    await SseReader(await post_run(http, secret, run_input(newer, "two"))).rest()
    await SseReader(await post_run(http, secret, run_input(newer, "three"))).rest()

    status, listing = await get_json(http, "/api/chats/", secret)
    assert status == 200
    assert [chat["id"] for chat in listing["chats"]] == [newer, older]
    assert listing["chats"][0]["assistant"] == "demo" and listing["has_next"] is False
    assert (await get_json(http, "/api/chats/", other))[1]["chats"] == []

    status, page = await get_json(http, f"/api/chats/{newer}/messages/?limit=2", secret)
    assert status == 200 and page["has_more"] is True
    assert [m["role"] for m in page["messages"]] == ["user", "assistant"]
    assert page["messages"][0]["content"] == "three"
    before = page["messages"][0]["position"]
    status, earlier = await get_json(
        http, f"/api/chats/{newer}/messages/?before={before}&limit=50", secret
    )
    assert earlier["messages"][0]["content"] == "two"
    assert earlier["has_more"] is False
    assert (await get_json(http, f"/api/chats/{newer}/messages/", other))[0] == 404
    bad = await get_json(http, f"/api/chats/{newer}/messages/?limit=x", secret)
    assert bad == (400, {"code": "bad_input", "message": "limit must be an integer >= 1, got 'x'"})


async def test_cancel_stops_the_run_and_its_stream_ends_cancelled(http, use_model):
    model = use_model(SteppedModel(["a ", "b ", "c"]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    stream = SseReader(await post_run(http, secret, run_input(thread_id, "go")))
    model.step()
    await stream.until(lambda e: e.type == "TEXT_MESSAGE_CONTENT")
    busy = await http("DELETE", f"/api/chats/{thread_id}/", headers=bearer(secret))
    assert busy.status == 409 and (await busy.json())["code"] == "busy"
    cancel = await http("POST", f"/api/chats/{thread_id}/cancel/", headers=bearer(secret))
    assert cancel.status == 200 and await cancel.json() == {"cancelled": True}
    rest = await stream.rest()
    assert rest[-1].type == "RUN_FINISHED" and rest[-1].data["outcome"] == {"type": "cancelled"}
    again = await http("POST", f"/api/chats/{thread_id}/cancel/", headers=bearer(secret))
    assert again.status == 409 and (await again.json())["code"] == "not_running"


async def test_a_chat_is_deleted_by_its_owner_only(http, use_model, login_cookie):
    use_model(ScriptedModel([say("Hi.")]))
    _, secret = await make_token("ada")
    _, other = await make_token("bob")
    thread_id = str(uuid.uuid4())
    await SseReader(await post_run(http, secret, run_input(thread_id, "hello"))).rest()
    theirs = await http("DELETE", f"/api/chats/{thread_id}/", headers=bearer(other))
    assert theirs.status == 404 and (await theirs.json())["code"] == "not_found"
    assert (await get_json(http, f"/api/chats/{thread_id}/", secret))[0] == 200
    deleted = await http("DELETE", f"/api/chats/{thread_id}/", headers=bearer(secret))
    assert deleted.status == 200 and await deleted.json() == {"deleted": True}
    assert not await ChatSession.objects.filter(pk=thread_id).aexists()
    assert (await get_json(http, f"/api/chats/{thread_id}/", secret))[0] == 404
    # A deleted thread is not taken again by a new run.
    reused = await post_run(http, secret, run_input(thread_id, "again"))
    assert reused.status == 404
    # A cookie request that changes something needs the CSRF token.
    _, cookie = await login_cookie("carol")
    refused = await http("DELETE", f"/api/chats/{uuid.uuid4()}/", headers={"Cookie": cookie})
    assert refused.status == 403 and (await refused.json())["code"] == "forbidden"
    assert (await http("PUT", "/api/chats/", headers=bearer(secret))).status == 405
    assert body_of({}) == "{}"


async def test_a_request_without_credentials_is_401_and_writes_no_session(http):
    from django.contrib.sessions.models import Session

    before = await Session.objects.acount()
    for url in (
        "/api/chats/",
        f"/api/chats/{uuid.uuid4()}/",
        f"/api/chats/{uuid.uuid4()}/messages/",
    ):
        call = await http("GET", url)
        assert call.status == 401 and (await call.json())["code"] == "unauthorized"
        assert "set-cookie" not in call.headers
    # A cookie no page gave (an unknown session) is nobody either, and stays unwritten.
    call = await http("GET", "/api/chats/", headers={"Cookie": "sessionid=made-up"})
    assert call.status == 401
    assert await Session.objects.acount() == before
