"""Background runs over HTTP (agent_app.api.runs), through the real ASGI application.

A program starts a run with no stream open and reads its state back; the run is the
chat's like any other: a socket of the same person sees it live and answers its approval,
a cancel stops it, a second message while it runs is busy. Every refusal is JSON.
"""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async

from agent_app.models import ChatSession
from agent_app.sessions.registry import live_sessions
from tests.app.agui_support import (  # noqa: F401 (the ``http`` fixture)
    bearer,
    http_fixture,
    make_token,
)
from tests.app.asgi_http import SseReader
from tests.app.llm_doubles import SteppedModel, call_tool, say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


async def post_run(http, secret: str | None, chat: str, body) -> tuple[int, dict, object]:
    headers = bearer(secret) if secret else {"Content-Type": "application/json"}
    text = body if isinstance(body, str) else json.dumps(body)
    call = await http("POST", f"/api/chats/{chat}/runs/", headers=headers, body=text)
    return call.status, await call.json(), call


async def get_state(http, secret: str, chat: str, request_id: str) -> tuple[int, dict]:
    call = await http("GET", f"/api/chats/{chat}/runs/{request_id}/", headers=bearer(secret))
    return call.status, await call.json()


async def run_ends(chat: str) -> None:
    """Await the end of the run this process runs for ``chat``."""
    live = live_sessions().get(chat)
    if live is not None:
        await live.wait_for_run()


async def test_a_background_run_completes_with_no_stream_and_its_state_is_readable(http, use_model):
    use_model(ScriptedModel([say("Here is your digest.")]))
    user, secret = await make_token("ada")
    chat = str(uuid.uuid4())
    status, body, call = await post_run(http, secret, chat, {"content": "digest please"})
    assert status == 202
    assert body == {"request_id": body["request_id"], "status": "running", "chat_id": chat}
    assert call.headers["location"] == f"/api/chats/{chat}/runs/{body['request_id']}/"
    row = await sync_to_async(ChatSession.objects.get)(pk=chat)
    assert (row.owner_id, row.assistant) == (user.pk, "demo")

    await run_ends(chat)
    status, state = await get_state(http, secret, chat, body["request_id"])
    assert status == 200
    assert state["status"] == "completed"
    assert state["answer"] == "Here is your digest."
    assert state["pending"] == [] and state["error"] is None
    assert set(state["usage"]) >= {"input_tokens", "output_tokens"}
    assert state["request_id"] == body["request_id"] and state["ended_at"]


async def test_a_waiting_run_lists_its_approval_and_any_socket_answers_it(http, use_model, sockets):
    use_model(ScriptedModel([call_tool("save_note", "note-1", title="T", text="x"), say("Saved.")]))
    _, secret = await make_token("ada")
    chat = str(uuid.uuid4())
    token = [(b"authorization", f"Bearer {secret}".encode())]
    status, body, _ = await post_run(http, secret, chat, {"content": "note this"})
    assert status == 202
    socket = await sockets(chat, headers=token, cookie="")
    await socket.until_event("custom", "approval_requested")

    status, state = await get_state(http, secret, chat, body["request_id"])
    assert (status, state["status"], state["answer"]) == (200, "waiting", None)
    [pending] = state["pending"]
    assert (pending["kind"], pending["tool_call_id"]) == ("approval", "note-1")
    assert pending["payload"]["tool"] == "save_note"

    reply = {"tool_call_id": "note-1", "approved": True, "digest": pending["payload"]["digest"]}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": reply})
    await socket.run_to_completion()
    status, state = await get_state(http, secret, chat, body["request_id"])
    assert (state["status"], state["answer"], state["pending"]) == ("completed", "Saved.", [])


async def test_cancel_stops_a_background_run_and_a_second_message_meanwhile_is_busy(
    http, use_model
):
    model = use_model(SteppedModel(["a ", "b ", "c"]))
    _, secret = await make_token("ada")
    chat = str(uuid.uuid4())
    _, body, _ = await post_run(http, secret, chat, {"content": "go"})
    status, busy, _ = await post_run(http, secret, chat, {"content": "and this"})
    assert status == 409 and busy["code"] == "busy" and busy["error"]["code"] == "busy"
    model.step()
    cancel = await http("POST", f"/api/chats/{chat}/cancel/", headers=bearer(secret))
    assert cancel.status == 200
    status, state = await get_state(http, secret, chat, body["request_id"])
    assert state["status"] == "cancelled"


async def test_an_ag_ui_client_re_attaches_to_a_background_run_and_follows_it_live(http, use_model):
    model = use_model(SteppedModel(["Your ", "digest."]))
    _, secret = await make_token("ada")
    chat = str(uuid.uuid4())
    _, body, _ = await post_run(http, secret, chat, {"content": "digest please"})
    model.step()
    follow = await http(
        "GET", f"/api/ag-ui/threads/{chat}/events", headers={**bearer(secret), "Last-Event-ID": "0"}
    )
    reader = SseReader(follow)
    started = await reader.until(lambda event: event.type == "RUN_STARTED")
    assert started[-1].data["runId"] == body["request_id"]
    await reader.until(lambda event: event.type == "TEXT_MESSAGE_CONTENT")
    model.finish()
    rest = await reader.rest()
    assert rest[-1].type == "RUN_FINISHED" and rest[-1].data["runId"] == body["request_id"]
    text = "".join(e.data["delta"] for e in reader.events if e.type == "TEXT_MESSAGE_CONTENT")
    assert text == "Your digest."


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({"content": "   "}, "bad_input", "'content' cannot be blank"),
        ({"content": 5}, "bad_input", "valid string"),
        ({"content": "é" * 16_385}, "too_large", "the limit is 32768 bytes"),
        ({}, "bad_input", "'content' is required"),
        ({"content": "hi", "model": "x"}, "bad_input", "Unknown field 'model'"),
        ({"content": "a\u0000b"}, "bad_input", "NUL"),
        ([1], "bad_input", "JSON object"),
        ("{not json", "bad_json", "not JSON"),
    ],
)
async def test_a_body_that_is_no_message_is_refused_with_a_json_error_and_stores_nothing(
    http, body, code, words
):
    _, secret = await make_token("ada")
    chat = str(uuid.uuid4())
    status, answer, _ = await post_run(http, secret, chat, body)
    assert status == 400
    assert answer["code"] == code and answer["error"]["code"] == code
    assert words in answer["error"]["message"]
    assert not await sync_to_async(ChatSession.objects.filter(pk=chat).exists)()


async def test_credentials_and_someone_elses_chat(http, use_model):
    use_model(ScriptedModel([say("Mine.")]))
    _, secret = await make_token("ada")
    _, other = await make_token("bob")
    chat = str(uuid.uuid4())
    status, body, _ = await post_run(http, None, chat, {"content": "hi"})
    assert (status, body["code"]) == (401, "unauthorized")
    status, body, _ = await post_run(http, "zett_wrong", chat, {"content": "hi"})
    assert (status, body["code"]) == (401, "unauthorized")

    _, started, _ = await post_run(http, secret, chat, {"content": "hi"})
    await run_ends(chat)
    status, body, _ = await post_run(http, other, chat, {"content": "mine now"})
    assert (status, body["code"]) == (404, "not_found")
    assert (await get_state(http, other, chat, started["request_id"]))[0] == 404
    assert (await get_state(http, secret, chat, "no-such-run"))[0] == 404
    status, body, _ = await post_run(http, secret, "not-a-uuid", {"content": "hi"})
    assert status == 404


async def test_a_new_chat_takes_the_assistant_named_and_an_unknown_one_is_refused(http):
    _, secret = await make_token("ada")
    status, body, _ = await post_run(
        http, secret, str(uuid.uuid4()), {"content": "hi", "assistant": "nobody"}
    )
    assert (status, body["code"]) == (400, "unknown_assistant")


async def test_a_chat_taken_over_by_staff_starts_no_background_run(http, use_model):
    from agent_app.people.records import take_over

    use_model(ScriptedModel([say("First."), say("Never.")]))
    user, secret = await make_token("ada")
    chat = str(uuid.uuid4())
    await post_run(http, secret, chat, {"content": "hi"})
    await run_ends(chat)
    await sync_to_async(take_over)(chat, user)
    status, body, _ = await post_run(http, secret, chat, {"content": "are you there?"})
    assert (status, body["code"]) == (409, "busy")
    assert "team is answering" in body["message"]
