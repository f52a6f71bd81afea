"""The AG-UI endpoints through the real ASGI application, in-process (agent_app.api.agui).

Every request goes through the whole stack (middleware, router, view) and the response
is read as it is produced (``tests.app.asgi_http``). A POST streams its run; the chat
page's sockets see the same run; a client that hangs up mid-answer and re-attaches with
``Last-Event-ID`` gets the rest, nothing lost or repeated; questions and approvals end the
stream in an interrupt that a ``resume`` answers exactly once, through the socket's reply
path. Every event parses with ``ag-ui-protocol`` and every stream passes ``ag-ui-validate``.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from ag_ui.core import AgentCapabilities
from asgiref.sync import sync_to_async
from django.test import override_settings

from agent_app.agui.encoder import RunEncoder
from agent_app.agui.sse import KEEP_ALIVE, encode_events
from agent_app.api.stream import ThreadStream
from agent_app.models import ChatRun, ChatSession, ExternalEventRecord, ReplyWait, WaitStatus
from agent_app.protocol.text import encode_frame
from tests.app.agui_support import (
    bearer,
    body_of,
    check_events,
    http_fixture,  # noqa: F401 (the ``http`` fixture)
    make_token,
    post_run,
    resume_input,
    run_input,
    validate_stream,
)
from tests.app.asgi_http import HttpCall, SseReader
from tests.app.conftest import stop_live_runs
from tests.app.llm_doubles import SteppedModel, call_tool, say
from zett_agent.messages import AssistantMessage
from zett_agent.model import ModelUsage
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


def types(events) -> list[str]:
    return [event.type if event.type != "CUSTOM" else event.data["name"] for event in events]


async def test_a_post_streams_the_run_as_ag_ui_events(http, use_model):
    use_model(ScriptedModel([say("Paris is the capital of France.")]))
    user, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    call = await post_run(http, secret, run_input(thread_id, "Capital of France?"))
    assert call.status == 200
    assert call.headers["content-type"] == "text/event-stream"
    assert call.headers["cache-control"] == "no-cache"
    assert call.headers["x-accel-buffering"] == "no"
    reader = SseReader(call)
    events = await reader.rest()
    assert events[0].type == "RUN_STARTED"
    assert events[0].data["threadId"] == thread_id
    run_id = events[0].data["runId"]
    assert types(events)[-1] == "RUN_FINISHED"
    assert events[-1].data["outcome"] == {"type": "success"}
    text = "".join(e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT")
    assert text == "Paris is the capital of France."
    check_events(events)
    await validate_stream(reader.text())
    # The thread is a chat of the token's user; the run id is zett's request id.
    chat = await ChatSession.objects.aget(pk=thread_id)
    assert chat.owner_id == user.pk and chat.assistant == "demo"
    run = await ChatRun.objects.aget(session_id=thread_id)
    assert run.request_id == run_id and run.status == "completed"


async def test_a_run_started_over_http_is_live_on_the_pages_socket(http, sockets, use_model):
    model = use_model(SteppedModel(["One ", "two ", "three."]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    # The thread's first message comes over HTTP; the page's socket is the same person's.
    call = await post_run(http, secret, run_input(thread_id, "Count"))
    socket = await sockets(
        thread_id, cookie="", origin="", headers=[(b"authorization", f"Bearer {secret}".encode())]
    )
    reader = SseReader(call)
    await reader.until(lambda e: e.type == "RUN_STARTED")
    model.finish()
    events = await reader.rest()
    frames = [f for f in await socket.run_to_completion() if "seq" in f]
    replayed = socket.session_frame["active_request_id"]
    assert replayed == reader.events[0].data["runId"]
    # The socket's frames, encoded, are the stream's events, ids and all; the stream's own
    # MESSAGES_SNAPSHOT (no id, read from the database) comes right after RUN_STARTED.
    encoded = RunEncoder(thread_id).encode_all(frames)
    streamed = [(e.id, e.data) for e in reader.events if e.type != "MESSAGES_SNAPSHOT"]
    assert [(e.id, e.data) for e in encoded] == streamed
    snapshot = reader.events[1]
    assert (snapshot.type, snapshot.id) == ("MESSAGES_SNAPSHOT", None)
    assert [m["content"] for m in snapshot.data["messages"]] == ["Count"]
    assert events[-1].type == "RUN_FINISHED"


async def test_a_posts_first_write_is_its_run_started_then_the_path_before_the_run(http, use_model):
    use_model(ScriptedModel([AssistantMessage("Two."), AssistantMessage("Three.")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    await SseReader(await post_run(http, secret, run_input(thread_id, "One?"))).rest()

    reader = SseReader(await post_run(http, secret, run_input(thread_id, "Two?")))
    await reader.next()
    # RUN_STARTED is written alone, before the run's frames or the history are read.
    assert [event.type for event in reader.events] == ["RUN_STARTED"]
    assert reader.raw == [reader.raw[0]] and reader.raw[0].count("\n\n") == 1
    events = await reader.rest()
    snapshot = events[0]
    assert (snapshot.type, snapshot.id) == ("MESSAGES_SNAPSHOT", None)
    # The path before the run, then the run's message; never the run's own answer.
    assert [m["content"] for m in snapshot.data["messages"]] == ["One?", "Two.", "Two?"]
    assert events[1].data["name"] == "zett.run_started"
    assert events[-1].type == "RUN_FINISHED"


async def test_a_run_started_on_the_page_can_be_followed_over_sse(http, sockets, use_model):
    model = use_model(SteppedModel(["Hello ", "from ", "the page."]))
    _, secret = await make_token("ada")
    headers = [(b"authorization", f"Bearer {secret}".encode())]
    socket = await sockets(cookie="", origin="", headers=headers)
    await socket.send({"type": "user_message", "content": "Hi"})
    started = await socket.expect("run_started")
    model.step()
    early = await socket.until_event("text_delta")
    call = await http(
        "GET", f"/api/ag-ui/threads/{socket.session_id}/events", headers=bearer(secret)
    )
    reader = SseReader(call)
    first = await reader.until(lambda e: e.type == "TEXT_MESSAGE_CONTENT")
    assert first[0].type == "RUN_STARTED" and first[0].data["runId"] == started["request_id"]
    model.finish()
    await reader.rest()
    later = await socket.run_to_completion()
    frames = [started] + [f for f in early + later if "seq" in f]
    assert [(e.id, e.data) for e in reader.events] == [
        (e.id, e.data) for e in RunEncoder(socket.session_id).encode_all(frames)
    ]
    check_events(reader.events)
    await validate_stream(reader.text())


async def test_a_dropped_stream_re_attaches_with_last_event_id_losing_nothing(http, use_model):
    words = [f"w{i} " for i in range(12)]
    model = use_model(SteppedModel(words))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    call = await post_run(http, secret, run_input(thread_id, "Talk"))
    first = SseReader(call)
    model.step(4)
    seen = await first.until(
        lambda e: e.type == "TEXT_MESSAGE_CONTENT" and e.data["delta"] == "w3 "
    )
    last_id = max(e.id for e in seen if e.id is not None)
    await call.disconnect()  # the client's link drops mid-answer
    model.step(4)  # the run goes on meanwhile
    headers = {**bearer(secret), "Last-Event-ID": str(last_id)}
    again = await http("GET", f"/api/ag-ui/threads/{thread_id}/events", headers=headers)
    assert again.status == 200
    second = SseReader(again)
    model.finish()
    rest = await second.rest()
    # The re-attached stream re-opens what was open (no ids), then goes on from the id.
    assert [e.type for e in rest[:2]] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    assert all(e.id is None for e in rest[:2])
    assert rest[0].data["runId"] == seen[0].data["runId"]
    text = "".join(e.data["delta"] for e in seen + rest if e.type == "TEXT_MESSAGE_CONTENT")
    assert text == "".join(words)
    ids = [e.id for e in seen + rest if e.id is not None]
    assert ids == sorted(set(ids))
    check_events(rest)
    await validate_stream(second.text())
    # ?after_seq= is the same as the header; 0 replays the whole run (none is active now).
    done = await http(
        "GET", f"/api/ag-ui/threads/{thread_id}/events?after_seq=0", headers=bearer(secret)
    )
    assert await done.read() == b""


async def test_an_idle_stream_sends_keep_alive_comments(http, use_model):
    model = use_model(SteppedModel(["slow"]))
    _, secret = await make_token("ada")
    with override_settings(ZETT_SSE_KEEPALIVE_SECONDS=0.05):
        call = await post_run(http, secret, run_input(str(uuid.uuid4()), "Wait"))
        reader = SseReader(call)
        await reader.until(lambda e: e.data.get("name") == "zett.model_started")
        # Nothing happens while the model waits: the next chunk is a comment.
        assert await call.chunk() == KEEP_ALIVE.encode()
        model.finish()
        assert (await SseReader(call).rest())[-1].type == "RUN_FINISHED"


async def test_an_approval_interrupt_is_resumed_exactly_once(http, sockets, use_model):
    use_model(
        ScriptedModel(
            [call_tool("save_note", "note-1", title="Milk", text="buy milk"), say("Saved.")]
        )
    )
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    reader = SseReader(await post_run(http, secret, run_input(thread_id, "save a note")))
    events = await reader.rest()
    finished = events[-1]
    assert finished.type == "RUN_FINISHED", types(events)
    assert finished.data["outcome"]["type"] == "interrupt", (types(events), finished)
    (interrupt,) = finished.data["outcome"]["interrupts"]
    assert interrupt["reason"] == "confirmation" and interrupt["toolCallId"] == "note-1"
    assert interrupt["expiresAt"]
    check_events(events)
    await validate_stream(reader.text())

    # New input while the approval waits is refused.
    busy = await post_run(http, secret, run_input(thread_id, "something else"))
    assert busy.status == 409
    assert (await busy.json())["code"] == "interrupts_pending"

    resume = resume_input(thread_id, interrupt["id"], {"approved": True})
    resumed = SseReader(await post_run(http, secret, resume))
    rest = await resumed.rest()
    assert rest[0].type == "RUN_STARTED" and rest[0].data["runId"] == finished.data["runId"]
    result = next(e for e in rest if e.type == "TOOL_CALL_RESULT")
    assert result.data["toolCallId"] == "note-1"
    assert result.data["metadata"]["zett"]["reply"] == {"kind": "approval", "approved": True}
    assert rest[-1].type == "RUN_FINISHED" and rest[-1].data["outcome"] == {"type": "success"}
    check_events(rest)
    # The call was started by the stream before the interrupt (AGUI207 knows no earlier run).
    allowed = await validate_stream(resumed.text(), allow={"AGUI207"})
    assert {d.rule for d in allowed} <= {"AGUI207"}
    # Audited like a socket's reply; the wait is done.
    record = await ExternalEventRecord.objects.aget(session_id=thread_id)
    assert record.name == "approval_response" and record.accepted_by == ["ConfirmationExtension"]
    wait = await ReplyWait.objects.aget(session_id=thread_id)
    assert wait.status == WaitStatus.DONE

    # The same answer again: a 200 stream that ends in RUN_ERROR with a code.
    again = SseReader(await post_run(http, secret, resume))
    assert again.call.status == 200
    refused = await again.rest()
    assert types(refused) == ["RUN_STARTED", "RUN_ERROR"]
    assert refused[-1].data["code"] == "interrupt_answered"
    check_events(refused)


async def test_a_question_is_answered_with_resume(http, use_model):
    use_model(
        ScriptedModel(
            [
                call_tool("ask_user", "ask-1", question="Which city?", options=["Paris", "Rome"]),
                lambda request: say(f"You chose {request.messages[-1].content}."),
            ]
        )
    )
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    events = await SseReader(await post_run(http, secret, run_input(thread_id, "Trip"))).rest()
    (interrupt,) = events[-1].data["outcome"]["interrupts"]
    assert interrupt["reason"] == "input_required" and interrupt["message"] == "Which city?"
    bad = await post_run(http, secret, resume_input(thread_id, "ask-1", {"nope": 1}))
    assert bad.status == 400 and (await bad.json())["code"] == "invalid_resume"
    rest = await SseReader(
        await post_run(http, secret, resume_input(thread_id, "ask-1", {"answer": "Rome"}))
    ).rest()
    text = "".join(e.data["delta"] for e in rest if e.type == "TEXT_MESSAGE_CONTENT")
    assert text == "You chose Rome."


async def test_an_expired_interrupt_ends_in_run_error(http, use_model):
    use_model(ScriptedModel([call_tool("save_note", "note-1", title="T", text="x"), say("Saved.")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    await SseReader(await post_run(http, secret, run_input(thread_id, "save"))).rest()
    await stop_live_runs()  # the run is gone; its wait stays stored
    await sync_to_async(
        lambda: ReplyWait.objects.filter(session_id=thread_id).update(
            status=WaitStatus.OPEN, expires_at="2000-01-01T00:00:00Z"
        )
    )()
    refused = await SseReader(
        await post_run(http, secret, resume_input(thread_id, "note-1", {"approved": True}))
    ).rest()
    assert types(refused) == ["RUN_STARTED", "RUN_ERROR"]
    assert refused[-1].data["code"] == "interrupt_expired"


async def test_bad_requests_get_the_documented_errors(http, use_model):
    use_model(ScriptedModel([call_tool("save_note", "note-1", title="T", text="x"), say("Saved.")]))
    _, secret = await make_token("ada")
    _, other = await make_token("bob")
    thread_id = str(uuid.uuid4())
    events = await SseReader(await post_run(http, secret, run_input(thread_id, "save"))).rest()
    assert events[-1].data["outcome"]["type"] == "interrupt"

    async def refused(call: HttpCall) -> tuple[int, str]:
        body = await call.json()
        assert body["message"]
        return call.status, body["code"]

    malformed = await http("POST", "/api/ag-ui/demo/", headers=bearer(secret), body="{nope")
    assert await refused(malformed) == (400, "bad_json")
    invalid = await http("POST", "/api/ag-ui/demo/", headers=bearer(secret), body='{"a": 1}')
    assert await refused(invalid) == (400, "bad_input")
    bad_thread = await post_run(http, secret, run_input("not-a-uuid"))
    assert await refused(bad_thread) == (400, "bad_thread_id")
    unknown = await post_run(http, secret, run_input(str(uuid.uuid4())), assistant="nobody")
    assert await refused(unknown) == (404, "unknown_assistant")
    # Someone else's thread does not exist for them: POST, GET events, resume.
    theirs = await post_run(http, other, run_input(thread_id, "hijack"))
    assert await refused(theirs) == (404, "not_found")
    peek = await http("GET", f"/api/ag-ui/threads/{thread_id}/events", headers=bearer(other))
    assert await refused(peek) == (404, "not_found")
    steal = await post_run(http, other, resume_input(thread_id, "note-1", {"approved": True}))
    assert await refused(steal) == (404, "not_found")
    # A resume naming another thread's interrupt, on a thread of one's own.
    mine = str(uuid.uuid4())
    await SseReader(await post_run(http, secret, run_input(mine, "hello"))).rest()
    crossed = await post_run(http, secret, resume_input(mine, "note-1", {"approved": True}))
    assert crossed.status == 200
    ended = await SseReader(crossed).rest()
    assert types(ended) == ["RUN_STARTED", "RUN_ERROR"]
    assert ended[-1].data["code"] == "unknown_interrupt"
    wait = await ReplyWait.objects.aget(session_id=thread_id)
    assert wait.status == WaitStatus.OPEN  # untouched: still answerable on its own thread


async def test_tokens_and_cookies_are_checked(http, use_model, login_cookie):
    use_model(ScriptedModel([say("Hi."), say("Hi again.")]))
    user, secret = await make_token("ada")
    body = body_of(run_input(str(uuid.uuid4())))
    json_type = {"Content-Type": "application/json"}

    async def status(call: HttpCall) -> tuple[int, str]:
        return call.status, (await call.json())["code"]

    none = await http("POST", "/api/ag-ui/demo/", headers=json_type, body=body)
    assert await status(none) == (401, "unauthorized")  # no token, no cookie: nobody
    wrong = await http("POST", "/api/ag-ui/demo/", headers=bearer("zett_wrong"), body=body)
    assert await status(wrong) == (401, "unauthorized")
    assert wrong.headers["www-authenticate"].startswith("Bearer")
    basic = {**json_type, "Authorization": "Basic YWRhOnB3"}
    assert await status(await http("POST", "/api/ag-ui/demo/", headers=basic, body=body)) == (
        401,
        "unauthorized",
    )
    in_query = await http("POST", f"/api/ag-ui/demo/?token={secret}", headers=json_type, body=body)
    assert await status(in_query) == (401, "unauthorized")
    _, expired = await make_token("old", days=-1)
    assert await status(
        await http("POST", "/api/ag-ui/demo/", headers=bearer(expired), body=body)
    ) == (401, "unauthorized")
    from agent_app.models import ApiToken

    await ApiToken.objects.filter(user=user).aupdate(revoked=True)
    revoked = await http("POST", "/api/ag-ui/demo/", headers=bearer(secret), body=body)
    assert await status(revoked) == (401, "unauthorized")

    # The browser session: a POST needs the CSRF token, as the page script sends it.
    _, cookie = await login_cookie("carol")
    token = "a" * 32
    cookies = {**json_type, "Cookie": f"{cookie}; csrftoken={token}"}
    no_csrf = await http("POST", "/api/ag-ui/demo/", headers=cookies, body=body)
    assert await status(no_csrf) == (403, "forbidden")
    with_csrf = await http(
        "POST", "/api/ag-ui/demo/", headers={**cookies, "X-CSRFToken": token}, body=body
    )
    assert with_csrf.status == 200
    assert (await SseReader(with_csrf).rest())[-1].type == "RUN_FINISHED"


async def test_capabilities_say_the_stream_is_resumable(http):
    _, secret = await make_token("ada")
    call = await http("GET", "/api/ag-ui/demo/capabilities", headers=bearer(secret))
    assert call.status == 200
    document = await call.json()
    assert document["transport"]["resumable"] is True
    AgentCapabilities.model_validate(document)
    missing = await http("GET", "/api/ag-ui/nobody/capabilities", headers=bearer(secret))
    assert missing.status == 404 and (await missing.json())["code"] == "unknown_assistant"


async def test_the_streams_fast_path_writes_what_the_encoder_writes(
    sockets, use_model, monkeypatch
):
    """Delta frames read without decoding them give the very text ``encode`` gives."""
    fast: list[bool] = []
    original = RunEncoder.delta_text

    def counted(self, *args):
        text = original(self, *args)
        fast.append(text is not None)
        return text

    monkeypatch.setattr(RunEncoder, "delta_text", counted)
    use_model(
        ScriptedModel(
            [AssistantMessage('He said "hi" \\ to café 𝄞 \ud800 — fine.', reasoning="Think: é")]
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Quote me"})
    frames = [f for f in await socket.run_to_completion() if "seq" in f]
    assert sum(f.get("event", {}).get("type") == "text_delta" for f in frames) > 3
    expected = encode_events(RunEncoder(socket.session_id).encode_all(frames))
    for after_seq in (None, frames[3]["seq"]):
        stream = ThreadStream(socket.session_id)
        stream._frames.extend([encode_frame(frame) for frame in frames] + [None])
        encoder = RunEncoder(socket.session_id, after_seq=after_seq)
        written = "".join([piece async for piece in stream.sse(encoder)])
        slow = encode_events(RunEncoder(socket.session_id, after_seq=after_seq).encode_all(frames))
        assert written == slow
    assert "".join([piece async for piece in _stream_of(socket.session_id, frames)]) == expected
    assert fast.count(True) > 3  # most deltas took the fast path


def _stream_of(thread_id, frames):
    stream = ThreadStream(thread_id)
    stream._frames.extend([encode_frame(frame) for frame in frames] + [None])
    return stream.sse(RunEncoder(thread_id))


async def test_the_per_person_limits_apply_to_streams_and_requests(http, use_model):
    model = use_model(SteppedModel(["one"]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    with override_settings(ZETT_WS_MAX_SOCKETS_PER_PERSON=1):
        stream = SseReader(await post_run(http, secret, run_input(thread_id, "go")))
        await stream.until(lambda e: e.type == "RUN_STARTED")
        # An open stream is one of the person's sockets: a second one is refused.
        second = await http("GET", f"/api/ag-ui/threads/{thread_id}/events", headers=bearer(secret))
        assert second.status == 429 and (await second.json())["code"] == "rate_limited"
        model.finish()
        await stream.rest()
    with override_settings(ZETT_MAX_CHATS_PER_HOUR=1):
        fresh = await post_run(http, secret, run_input(str(uuid.uuid4()), "another chat"))
        assert fresh.status == 429 and (await fresh.json())["code"] == "rate_limited"
    with override_settings(ZETT_WS_RATE_LIMIT={"burst": 1, "per_second": 0.001}):
        statuses = [
            (await http("GET", "/api/chats/", headers=bearer(secret))).status for _ in range(3)
        ]
        assert 429 in statuses


def test_a_continuation_asking_an_answered_wait_again_is_no_interrupt():
    """A continuation runs its calls with the answers it has: asked again, no interrupt."""
    thread = str(uuid.uuid4())
    ask = {"type": "custom", "name": "approval_requested"}
    ask["payload"] = {"tool_call_id": "c1", "tool": "save_note", "arguments": {}, "digest": "d"}
    reply = {"tool_call_id": "c1", "approved": True}
    frames = [
        {"type": "run_started", "seq": 1, "request_id": "A"},
        {"type": "agent_event", "seq": 2, "request_id": "A", "event": ask},
        {"type": "reply_accepted", "seq": 3, "request_id": "A", "name": "approval_response"}
        | {"correlation_id": "c1", "payload": reply},
        {"type": "run_started", "seq": 4, "request_id": "B", "resumed_from": "A"},
        {"type": "agent_event", "seq": 5, "request_id": "B", "event": ask},
        {"type": "agent_event", "seq": 6, "request_id": "B", "event": {"type": "run_completed"}},
    ]
    live = RunEncoder(thread)
    by_frame = [live.encode(frame) for frame in frames]
    assert [e.type for e in by_frame[1]][-1] == "RUN_FINISHED"  # the first ask: an interrupt
    assert [e.type for e in by_frame[4]] == ["CUSTOM"]  # asked again once answered: none
    assert by_frame[5][-1].data["outcome"] == {"type": "success"}
    # A stream that joins later knows the answered waits from the store.
    later = RunEncoder(thread, answered=["c1"]).encode_all(frames[3:])
    assert [e.type for e in later] == [e.type for e in by_frame[3] + by_frame[4] + by_frame[5]]
    check_events(later)


async def test_a_stream_nobody_reads_lets_go_of_the_session(http, monkeypatch):
    """A client that hangs up before the first byte leaves no subscriber behind."""
    from agent_app.api import stream as stream_module
    from agent_app.sessions.registry import live_sessions

    abandoned = asyncio.Event()
    original = ThreadStream._abandon

    def abandon(self):
        original(self)
        abandoned.set()

    monkeypatch.setattr(stream_module, "UNCLAIMED_SECONDS", 0.01)
    monkeypatch.setattr(ThreadStream, "_abandon", abandon)
    stream = ThreadStream(str(uuid.uuid4()))
    await stream.open()
    live = live_sessions().get(stream.thread_id)
    assert live is not None and stream in live.sockets
    await abandoned.wait()
    assert stream._closed and live_sessions().get(stream.thread_id) is None
    assert [piece async for piece in stream.sse(RunEncoder(stream.thread_id))] == []


async def test_the_token_budget_applies_to_http_runs(http, use_model, settings):
    """A run that passes the budget ends in RUN_ERROR; the next one is refused with 429."""
    settings.ZETT_TOKEN_BUDGETS = {"user": 100}
    model = use_model(
        ScriptedModel(
            [call_tool("calculate", expression="1+1"), say("2")],
            usage=ModelUsage(input_tokens=60, output_tokens=40),
        )
    )
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    events = await SseReader(await post_run(http, secret, run_input(thread_id, "1+1?"))).rest()
    assert events[-1].type == "RUN_ERROR" and events[-1].data["code"] == "budget_exceeded"
    check_events(events)
    refused = await post_run(http, secret, run_input(thread_id, "and 2+2?"))
    body = await refused.json()
    assert refused.status == 429 and body["code"] == "budget_exceeded"
    assert body["resets_at"].endswith("T00:00:00Z")
    assert len(model.requests) == 1


async def test_the_api_lives_under_the_prefix_the_app_is_mounted_at(http, use_model, settings):
    settings.ROOT_URLCONF = "tests.app.prefixed_urls"
    use_model(ScriptedModel([say("Hi from the prefix.")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    call = await http(
        "POST",
        "/support/chat/api/ag-ui/demo/",
        headers=bearer(secret),
        body=body_of(run_input(thread_id, "hello")),
    )
    assert call.status == 200
    assert (await SseReader(call).rest())[-1].type == "RUN_FINISHED"
    listing = await http("GET", "/support/chat/api/chats/", headers=bearer(secret))
    assert [chat["id"] for chat in (await listing.json())["chats"]] == [thread_id]
    capabilities = await http(
        "GET", "/support/chat/api/ag-ui/demo/capabilities", headers=bearer(secret)
    )
    document = await capabilities.json()
    assert document["transport"]["resumable"] is True
    reattach = document["custom"]["zett"]["reattach"]
    assert reattach == "GET /support/chat/api/ag-ui/threads/<threadId>/events with Last-Event-ID"


async def test_a_re_attachment_inside_merged_deltas_repeats_no_text(http, use_model, settings):
    """The replay buffer merges a long run's deltas; re-attaching inside them still gives
    exactly the text after the id."""
    settings.ZETT_REPLAY_FRAMES = 4
    words = [f"w{i} " for i in range(30)]
    model = use_model(SteppedModel(words))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    call = await post_run(http, secret, run_input(thread_id, "Talk"))
    first = SseReader(call)
    model.step(10)
    seen = await first.until(lambda e: e.data.get("delta") == "w9 ")
    last_id = seen[-1].id
    await call.disconnect()
    model.step(10)  # merged with the deltas before the id, in the buffer
    headers = {**bearer(secret), "Last-Event-ID": str(last_id)}
    again = SseReader(await http("GET", f"/api/ag-ui/threads/{thread_id}/events", headers=headers))
    await again.until(lambda e: e.type == "TEXT_MESSAGE_CONTENT")
    model.finish()
    await again.rest()
    rest = again.events
    text = "".join(e.data["delta"] for e in seen + rest if e.type == "TEXT_MESSAGE_CONTENT")
    assert text == "".join(words)
    assert [e.type for e in rest[:2]] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    assert rest[1].data["messageId"] == next(
        e.data["messageId"] for e in seen if e.type == "TEXT_MESSAGE_START"
    )


@pytest.mark.parametrize(
    ("kept_seconds", "change_model", "builds"),
    [(30.0, False, 1), (-1.0, False, 2), (30.0, True, 2)],
    ids=["kept", "kept-too-long", "another-factory"],
)
async def test_a_threads_next_post_brings_its_agent_back_while_it_is_kept(
    http, use_model, monkeypatch, kept_seconds, change_model, builds
):
    """A thread's live session is dropped after each stream; its agent is kept for the
    next POST (``AGENT_KEPT_SECONDS``) unless the registry builds agents otherwise now."""
    from agent_app.sessions import registry as registry_module
    from agent_app.sessions.registry import live_sessions

    monkeypatch.setattr(registry_module, "AGENT_KEPT_SECONDS", kept_seconds)
    built: list[str] = []

    def counted():
        factory = live_sessions().factory

        async def build(session_id: str):
            built.append(session_id)
            return await factory(session_id)

        live_sessions().factory = build

    use_model(ScriptedModel([say("One."), say("Two.")]))
    counted()
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    for number, text in enumerate(("One?", "Two?")):
        if number and change_model:
            use_model(ScriptedModel([say("Two.")]))
            counted()
        events = await SseReader(await post_run(http, secret, run_input(thread_id, text))).rest()
        assert types(events)[-1] == "RUN_FINISHED"
        live = live_sessions().get(thread_id)
        if live is not None:
            await live.wait_for_run()
        assert live_sessions().get(thread_id) is None  # dropped: the next POST brings it up
    assert built == [thread_id] * builds
