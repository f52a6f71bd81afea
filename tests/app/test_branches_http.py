"""The JSON API and the AG-UI endpoint give a branched chat's shown path, never another
version of a turn: ``GET …/messages/`` pages it, and a new AG-UI run's stream opens with a
``MESSAGES_SNAPSHOT`` of it."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from tests.app.agui_support import (  # noqa: F401 (the ``http`` fixture)
    bearer,
    check_events,
    http_fixture,
    post_run,
    run_input,
    validate_stream,
)
from tests.app.asgi_http import SseReader
from tests.app.llm_doubles import say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def token_of(user) -> str:
    from agent_app.guard.tokens import issue

    return issue(user)[1]


async def branched_chat(sockets, login_cookie, use_model, *later: str):
    """A chat of two turns whose first turn was answered again: shown, q1 and "a1 again"."""
    model = use_model(ScriptedModel([say(text) for text in ("a1", "a2", "a1 again", *later)]))
    user, cookie = await login_cookie("ada")
    socket = await sockets(cookie=cookie)
    for question in ("q1", "q2"):
        await socket.send({"type": "user_message", "content": question})
        await socket.run_to_completion()
    await socket.send({"type": "regenerate", "position": 0})
    await socket.run_to_completion()
    return model, socket, await token_of(user)


async def test_the_json_api_pages_the_shown_path(http, sockets, login_cookie, use_model):
    _, socket, secret = await branched_chat(sockets, login_cookie, use_model)
    call = await http("GET", f"/api/chats/{socket.session_id}/messages/", headers=bearer(secret))
    page = await call.json()
    assert [item["content"] for item in page["messages"]] == ["q1", "a1 again"]
    assert page["messages"][0]["versions"] == {"index": 2, "count": 2}
    assert all(isinstance(item["id"], int) for item in page["messages"])
    await socket.send({"type": "switch_version", "position": 0, "index": 1})
    await socket.expect("branch_switched", index=1)
    call = await http("GET", f"/api/chats/{socket.session_id}/messages/", headers=bearer(secret))
    assert [item["content"] for item in (await call.json())["messages"]] == [
        "q1",
        "a1",
        "q2",
        "a2",
    ]


async def test_an_ag_ui_run_opens_with_a_snapshot_of_the_shown_path(
    http, sockets, login_cookie, use_model
):
    model, socket, secret = await branched_chat(sockets, login_cookie, use_model, "a3")
    call = await post_run(http, secret, run_input(socket.session_id, "q3"))
    assert call.status == 200
    reader = SseReader(call)
    events = await reader.rest()
    assert [event.type for event in events[:2]] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    messages = events[1].data["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "q1"),
        ("assistant", "a1 again"),
        ("user", "q3"),
    ]
    assert len({m["id"] for m in messages}) == 3
    assert events[-1].type == "RUN_FINISHED"
    check_events(events)
    await validate_stream(reader.text())
    assert [m.content for m in model.requests[3].messages if m.role.value != "system"] == [
        "q1",
        "a1 again",
        "q3",
    ]
