"""The chat socket end to end: every frame of the protocol, through the real ASGI app.

The model is scripted (``ScriptedModel``, or ``GatedModel`` where a test must hold the run
at a precise point); everything else — origin check, consumer, runtime, extensions, ORM — is
the product's own code on the test database. Replies to a waiting run (``ask_user``
answers, approvals) are ``test_consumer_replies.py``'s.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from agent_app.models import ChatMessage, ChatSession, ExternalEventRecord
from agent_app.protocol.frames import MAX_CONTENT_BYTES, MAX_FRAME_BYTES
from tests.app.conftest import answer_of, events_of, rows
from tests.app.llm_doubles import EndlessModel, GatedModel, call_tool, completed, say
from zett_agent.model import ModelEvent
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


# --- connecting -------------------------------------------------------------------------


async def test_a_new_socket_gets_an_empty_session_frame_and_stores_nothing(sockets, use_model):
    use_model(ScriptedModel([say("Hi.")]))
    socket = await sockets()
    assert socket.session_frame == {
        "type": "session",
        "session_id": socket.session_id,
        "title": "",
        "history": [],
        "has_more_history": False,
        "runs": [],
        "pending": [],
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        "support": {
            "needs_human": False,
            "reason": None,
            "needs_human_since": None,
            "taken_over": False,
            "staff": None,
        },
        "active_request_id": None,
        "last_seq": 0,
    }
    await socket.assert_quiet()
    assert not await ChatSession.objects.filter(pk=socket.session_id).aexists()
    await socket.send({"type": "user_message", "content": "Hi"})
    await socket.run_to_completion()
    session = await ChatSession.objects.aget(pk=socket.session_id)
    assert session.owner_id is None and session.browser_key


async def test_a_frame_that_needs_no_database_makes_no_trip_to_the_orm_thread(
    sockets, use_model, monkeypatch
):
    """Channels' own ``dispatch`` hops to the ORM thread before every frame to close stale
    connections; the consumer's ORM calls do that themselves, so a ping costs no hop."""
    import channels.consumer

    use_model(ScriptedModel([say("Hi.")]))
    socket = await sockets()
    hops = []

    async def counted() -> None:
        hops.append(1)

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    for _ in range(5):
        await socket.send({"type": "ping"})
        assert (await socket.receive())["type"] == "pong"
    assert hops == []


async def test_a_socket_from_another_origin_is_refused(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets(origin="http://evil.example")
    assert not socket.connected
    assert not await ChatSession.objects.filter(pk=socket.session_id).aexists()


async def test_a_client_that_sends_no_origin_is_not_a_browser_and_is_admitted(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets(origin="")
    assert socket.connected
    assert socket.session_frame["session_id"] == socket.session_id


async def test_a_socket_from_a_lookalike_host_is_refused(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets(origin="http://testserver.evil.example")
    assert not socket.connected


async def test_a_session_owned_by_someone_else_is_forbidden(sockets, use_model, login_cookie):
    use_model(ScriptedModel())
    owner, _ = await login_cookie("owner")
    session = await ChatSession.objects.acreate(owner=owner)
    _, stranger_cookie = await login_cookie("stranger")
    socket = await sockets(str(session.pk), cookie=stranger_cookie, expect_session=False)
    await socket.expect_error("forbidden")
    closing = await socket.communicator.receive_output(timeout=10)
    assert closing == {"type": "websocket.close", "code": 4403}


async def test_the_owner_and_anonymous_visitors_of_unowned_sessions_get_in(
    sockets, use_model, login_cookie
):
    use_model(ScriptedModel())
    owner, cookie = await login_cookie("owner")
    session = await ChatSession.objects.acreate(owner=owner)
    mine = await sockets(str(session.pk), cookie=cookie)
    assert mine.session_frame["session_id"] == str(session.pk)
    anonymous = await sockets()
    assert anonymous.session_frame["history"] == []


async def test_a_signed_in_user_who_starts_a_new_session_owns_it(sockets, use_model, login_cookie):
    use_model(ScriptedModel([say("Hello, Alice.")]))
    user, cookie = await login_cookie("alice")
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Hi"})
    await socket.run_to_completion()
    session = await ChatSession.objects.aget(pk=socket.session_id)
    assert (session.owner_id, session.browser_key) == (user.pk, "")


# --- a request --------------------------------------------------------------------------


async def test_a_user_message_streams_numbered_agent_events_until_run_completed(sockets, use_model):
    use_model(ScriptedModel([say("Hello there, friend.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi"})
    frames = await socket.run_to_completion()
    started, frames = frames[0], frames[1:]
    assert started["type"] == "run_started"
    assert (started["content"], started["position"], started["kind"]) == ("Hi", 0, "message")
    assert started["resumed_from"] is None
    assert all(frame["type"] == "agent_event" for frame in frames)
    assert frames[0]["seq"] == started["seq"] + 1
    assert frames[0]["request_id"] == started["request_id"]
    seqs = [frame["seq"] for frame in frames]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert len({frame["request_id"] for frame in frames}) == 1
    assert {frame["event"]["session_id"] for frame in frames} == {socket.session_id}
    text = "".join(e["delta"] for e in events_of(frames) if e["type"] == "text_delta")
    assert text == "Hello there, friend."
    assert answer_of(frames) == "Hello there, friend."
    await socket.assert_quiet()
    assert await rows(socket.session_id) == [
        ("user", "Hi"),
        ("assistant", "Hello there, friend."),
    ]


async def test_the_next_message_is_accepted_as_soon_as_run_completed_arrives(sockets, use_model):
    use_model(ScriptedModel([say("One."), say("Two.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "first"})
    first = await socket.run_to_completion()
    await socket.send({"type": "user_message", "content": "second"})
    second = await socket.run_to_completion()
    assert answer_of(second) == "Two."
    assert second[0]["seq"] > first[-1]["seq"]
    assert second[0]["request_id"] != first[0]["request_id"]


async def test_a_tool_call_is_streamed_with_its_result(sockets, use_model):
    use_model(ScriptedModel([call_tool("calculate", expression="1/3 + 1/6"), say("It is 0.5.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "1/3 + 1/6?"})
    frames = await socket.run_to_completion()
    completed_tool = next(e for e in events_of(frames) if e["type"] == "tool_completed")
    assert completed_tool["message"]["content"] == "0.5"
    assert completed_tool["tool_calls"][0]["name"] == "calculate"
    assert [role for role, _ in await rows(socket.session_id)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_history_is_sent_again_on_reconnect(sockets, use_model):
    use_model(ScriptedModel([say("Stored answer.")]))
    first = await sockets()
    await first.send({"type": "user_message", "content": "Remember me"})
    await first.run_to_completion()
    await first.close()
    again = await sockets(first.session_id)
    history = again.session_frame["history"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "Remember me"),
        ("assistant", "Stored answer."),
    ]
    assert again.session_frame["active_request_id"] is None


async def test_seq_keeps_increasing_after_every_socket_closed(sockets, use_model):
    use_model(ScriptedModel([say("a"), say("b")]))
    first = await sockets()
    await first.send({"type": "user_message", "content": "one"})
    before = await first.run_to_completion()
    await first.close()
    again = await sockets(first.session_id)
    await again.send({"type": "user_message", "content": "two"})
    after = await again.run_to_completion()
    assert after[0]["seq"] > before[-1]["seq"]


async def test_a_model_failure_is_run_failed_and_the_next_request_works(sockets, use_model):
    def broken(request):
        raise RuntimeError("provider exploded")

    use_model(ScriptedModel([broken, say("Back again.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "try"})
    frames = await socket.until_event("run_failed")
    failed = frames[-1]
    assert failed["error"] == {"type": "RuntimeError", "message": "provider exploded"}
    assert failed["request_id"] == frames[0]["request_id"]
    await socket.send({"type": "user_message", "content": "again"})
    assert answer_of(await socket.run_to_completion()) == "Back again."
    assert await rows(socket.session_id) == [
        ("user", "try"),
        ("user", "again"),
        ("assistant", "Back again."),
    ]


async def test_the_agent_is_built_by_the_first_request_not_by_connecting(
    sockets, settings, use_model
):
    settings.ZETT_MODEL = "tests.app.llm_doubles:no_such_factory"
    socket = await sockets()  # connecting resolves no model, so this bad one is not noticed
    use_model(ScriptedModel([say("Built now.")]))
    await socket.send({"type": "user_message", "content": "hello"})
    assert answer_of(await socket.run_to_completion()) == "Built now."


async def test_a_request_after_a_failed_build_tries_again(sockets, settings, use_model):
    settings.ZETT_MODEL = "tests.app.llm_doubles:no_such_factory"
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "hello"})
    await socket.expect("run_started")
    await socket.expect("run_failed")
    use_model(ScriptedModel([say("Fixed.")]))
    await socket.send({"type": "user_message", "content": "again"})
    assert answer_of(await socket.run_to_completion()) == "Fixed."


async def test_a_model_that_cannot_be_built_fails_each_request_clearly(sockets, settings):
    settings.ZETT_MODEL = "tests.app.llm_doubles:no_such_factory"
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "hello"})
    await socket.expect("run_started")
    failed = await socket.expect("run_failed")
    assert failed["error"]["type"] == "ImproperlyConfigured"
    assert "no_such_factory" in failed["error"]["message"]
    await socket.assert_quiet()
    assert await rows(socket.session_id) == [("user", "hello")]  # written before the build


# --- cancel, steer, disconnect ----------------------------------------------------------


async def test_cancel_while_waiting_for_an_answer_then_a_new_message_works(sockets, use_model):
    use_model(
        ScriptedModel([call_tool("ask_user", "ask-1", question="Sure?"), say("Fresh start.")])
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "first"})
    frames = await socket.until_event("custom", "ask_user")
    await socket.send({"type": "cancel"})
    cancelled = (await socket.until_event("run_cancelled"))[-1]
    assert cancelled["request_id"] == frames[0]["request_id"]
    assert cancelled["seq"] > frames[-1]["seq"]
    late = {"tool_call_id": "ask-1", "answer": "yes"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": late})
    await socket.expect("external_event_result", accepted_by=[], reason="not_running")
    await socket.send({"type": "user_message", "content": "second"})
    assert answer_of(await socket.run_to_completion()) == "Fresh start."
    stored = await rows(socket.session_id)
    assert stored[0] == ("user", "first")
    assert stored[-2:] == [("user", "second"), ("assistant", "Fresh start.")]


async def test_closing_the_socket_mid_run_does_not_stop_the_run(sockets, use_model):
    gate = asyncio.Event()
    model = use_model(GatedModel([ModelEvent.text("Thinking"), gate, completed("Thought it")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Keep this"})
    await socket.until_event("text_delta")
    await socket.close()
    assert not model.closed.is_set()
    gate.set()
    await model.closed.wait()  # the stream ran to its end with nobody watching
    again = await sockets(socket.session_id)
    while again.session_frame["active_request_id"] is not None:  # joined before it was stored
        await again.run_to_completion()
        again = await sockets(socket.session_id)
    assert [m["content"] for m in again.session_frame["history"]] == ["Keep this", "Thought it"]
    assert again.session_frame["runs"][0]["status"] == "completed"


async def test_a_model_that_never_waits_still_streams_and_hears_cancel(sockets, use_model):
    # The run task lets the event loop go round while it streams, or this socket would
    # see nothing and read nothing until the stream ended, which here is never.
    model = use_model(EndlessModel())
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Go on forever"})
    await socket.until_event("text_delta")
    await socket.send({"type": "cancel"})
    await socket.until_event("run_cancelled")
    assert model.closed.is_set()
    stored = [m async for m in ChatMessage.objects.filter(session_id=socket.session_id)]
    assert [(m.role, m.partial) for m in stored] == [("user", False), ("assistant", True)]
    assert stored[1].content.startswith("x")  # what had streamed when Stop was pressed


async def test_a_cancelled_answer_is_stored_as_exactly_the_text_its_sockets_were_sent(
    sockets, use_model
):
    class Counting:
        """Streams ``0 1 2 …`` forever, never waiting: every delta is different."""

        async def stream(self, request):
            for number in itertools.count():
                yield ModelEvent.text(f"{number} ")

    use_model(Counting())
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Go on forever"})
    shown = []
    while len(shown) < 25:
        frame = await socket.receive()
        if frame["type"] == "agent_event" and frame["event"]["type"] == "text_delta":
            shown.append(frame["event"]["delta"])
    await socket.send({"type": "cancel"})
    while (frame := await socket.receive())["type"] != "run_cancelled":
        if frame["type"] == "agent_event" and frame["event"]["type"] == "text_delta":
            shown.append(frame["event"]["delta"])
    stored = [m async for m in ChatMessage.objects.filter(session_id=socket.session_id)]
    assert [(m.role, m.partial) for m in stored] == [("user", False), ("assistant", True)]
    assert stored[1].content == "".join(shown)


async def test_a_delta_sent_as_the_cancel_lands_is_part_of_the_stored_answer(sockets, use_model):
    """A cancellation can land while a delta's frame is still going out (a slow socket, the
    Redis outbox draining): the frame is numbered and kept for replay, some sockets have it,
    so the stored partial answer holds it too."""
    from agent_app.sessions.registry import live_sessions

    class Counting:
        async def stream(self, request):
            for number in itertools.count():
                yield ModelEvent.text(f"{number} ")

    class SlowSocket:
        """Takes frames until armed, then never finishes sending the next delta."""

        def __init__(self) -> None:
            self.armed = False
            self.stuck = asyncio.Event()

        async def send_text(self, text: str) -> None:
            if self.armed and '"text_delta"' in text:
                self.armed = False
                self.stuck.set()
                await asyncio.Event().wait()  # until the run's cancellation ends this

    use_model(Counting())
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Go on forever"})
    shown = [(await socket.until_event("text_delta"))[-1]["event"]["delta"]]
    live = live_sessions().get(socket.session_id)
    slow = SlowSocket()
    live.feed.sockets.append(slow)  # after the test's socket: that one gets every frame
    slow.armed = True
    await slow.stuck.wait()
    await socket.send({"type": "cancel"})
    while (frame := await socket.receive())["type"] != "run_cancelled":
        if frame["type"] == "agent_event" and frame["event"]["type"] == "text_delta":
            shown.append(frame["event"]["delta"])
    live.feed.forget(slow)
    stored = [m async for m in ChatMessage.objects.filter(session_id=socket.session_id)]
    assert [(m.role, m.partial) for m in stored] == [("user", False), ("assistant", True)]
    assert stored[1].content == "".join(shown)


async def test_steer_redirects_the_running_request(sockets, use_model):
    gate = asyncio.Event()
    model = use_model(
        GatedModel(
            [ModelEvent.text("Working on A"), gate, completed("Working on A")],
            [ModelEvent.text("Now B."), completed("Now B.")],
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Do A"})
    await socket.until_event("text_delta")
    await socket.send({"type": "steer", "content": "Actually do B"})
    result = await socket.expect("external_event_result", name="steering_message")
    assert result["accepted_by"] == ["SteeringExtension"]
    assert result["correlation_id"] is None
    gate.set()
    frames = await socket.run_to_completion()
    assert "steering_started" in [e["type"] for e in events_of(frames)]
    assert answer_of(frames) == "Now B."
    assert model.requests[1].messages[-1].content == "Actually do B"


async def test_cancel_and_steer_without_a_run_are_not_running(sockets, use_model):
    use_model(ScriptedModel([say("Done.")]))
    socket = await sockets()
    await socket.send({"type": "cancel"})
    await socket.expect_error("not_running")
    # steer is sugar for the steering_message external event: answered the same way
    await socket.send({"type": "steer", "content": "go left"})
    await socket.expect(
        "external_event_result", name="steering_message", accepted_by=[], reason="not_running"
    )
    await socket.send({"type": "external_event", "name": "approval_response", "payload": {}})
    await socket.expect(
        "external_event_result", name="approval_response", accepted_by=[], reason="not_running"
    )
    await socket.assert_quiet()
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()
    await socket.send({"type": "steer", "content": "too late"})  # a stored chat, nothing running
    await socket.expect(
        "external_event_result", name="steering_message", accepted_by=[], reason="not_running"
    )
    await socket.assert_quiet()


async def test_a_second_message_while_running_is_busy(sockets, use_model):
    gate = asyncio.Event()
    use_model(GatedModel([ModelEvent.text("Busy"), gate, completed("Busy")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "one"})
    await socket.until_event("text_delta")
    await socket.send({"type": "user_message", "content": "two"})
    await socket.expect_error("busy")
    gate.set()
    await socket.run_to_completion()


async def test_two_sockets_on_one_session_share_the_stream_and_the_busy_state(sockets, use_model):
    gate = asyncio.Event()
    use_model(GatedModel([ModelEvent.text("Shared"), gate, completed("Shared")]))
    first = await sockets()
    second = await sockets(first.session_id)
    await first.send({"type": "user_message", "content": "hello"})
    seen_first = await first.until_event("text_delta")
    seen_second = await second.until_event("text_delta")
    assert [f["seq"] for f in seen_first] == [f["seq"] for f in seen_second]
    await second.send({"type": "user_message", "content": "me too"})
    await second.expect_error("busy")
    third = await sockets(first.session_id)
    assert third.session_frame["active_request_id"] == seen_first[0]["request_id"]
    gate.set()
    end_first = await first.run_to_completion()
    end_second = await second.run_to_completion()
    assert [f["seq"] for f in end_first] == [f["seq"] for f in end_second]


async def test_a_watcher_closing_does_not_cancel_the_run_of_another_socket(sockets, use_model):
    gate = asyncio.Event()
    use_model(GatedModel([ModelEvent.text("Still"), gate, completed("Still here")]))
    owner = await sockets()
    watcher = await sockets(owner.session_id)
    await owner.send({"type": "user_message", "content": "go"})
    await owner.until_event("text_delta")
    await watcher.close()
    gate.set()
    assert answer_of(await owner.run_to_completion()) == "Still here"


# --- bad frames -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("{not json", "bad_json"),
        ("   ", "bad_json"),
        ("[1, 2]", "bad_frame"),
        ('"user_message"', "bad_frame"),
        ("{}", "bad_frame"),
        ('{"type": 7}', "bad_frame"),
        ('{"type": "user_message"}', "bad_frame"),
        ('{"type": "user_message", "content": "   "}', "bad_frame"),
        ('{"type": "user_message", "content": ["hi"]}', "bad_frame"),
        ('{"type": "external_event", "name": "x"}', "bad_frame"),
        ('{"type": "external_event", "name": "x", "payload": [1]}', "bad_frame"),
        ('{"type": "external_event", "name": "", "payload": {}}', "bad_frame"),
        ('{"type": "steer"}', "bad_frame"),
        ('{"type": "launch_rockets"}', "unknown_type"),
    ],
)
async def test_a_bad_frame_gets_an_error_and_the_socket_stays_open(sockets, use_model, raw, code):
    use_model(ScriptedModel([say("Still fine.")]))
    socket = await sockets()
    await socket.send_raw(raw)
    await socket.expect_error(code)
    await socket.send({"type": "user_message", "content": "ok?"})
    assert answer_of(await socket.run_to_completion()) == "Still fine."


async def test_a_binary_frame_that_is_not_utf8_is_bad_json(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets()
    await socket.send_raw(data=b"\xff\xfe")
    await socket.expect_error("bad_json")
    await socket.send_raw(data=b'{"type": "ping"}')
    await socket.expect("pong")


async def test_content_up_to_32_kib_is_accepted_and_beyond_is_too_large(sockets, use_model):
    use_model(ScriptedModel([say("Got it.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "x" * (MAX_CONTENT_BYTES + 1)})
    await socket.expect_error("too_large")
    await socket.send({"type": "user_message", "content": "é" * (MAX_CONTENT_BYTES // 2 + 1)})
    await socket.expect_error("too_large")
    await socket.send({"type": "user_message", "content": "x" * MAX_CONTENT_BYTES})
    assert answer_of(await socket.run_to_completion()) == "Got it."
    assert not any(
        [r async for r in ChatMessage.objects.filter(content="x" * (MAX_CONTENT_BYTES + 1))]
    )


async def test_a_frame_over_256_kib_is_too_large(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets()
    payload = {"blob": "y" * MAX_FRAME_BYTES}
    await socket.send({"type": "external_event", "name": "big", "payload": payload})
    await socket.expect_error("too_large")
    await socket.assert_quiet()
    assert not await ExternalEventRecord.objects.aexists()


async def test_ping_is_answered_by_pong(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets()
    await socket.send({"type": "ping"})
    assert await socket.receive() == {"type": "pong"}


async def test_a_flood_of_frames_is_rate_limited(sockets, use_model, settings):
    settings.ZETT_WS_RATE_LIMIT = {"burst": 3, "per_second": 0.0}
    use_model(ScriptedModel())
    socket = await sockets()
    for _ in range(3):
        await socket.send({"type": "ping"})
        await socket.expect("pong")
    await socket.send({"type": "ping"})
    await socket.expect_error("rate_limited")


async def test_the_model_sees_each_stored_message_once(sockets, use_model):
    model = use_model(ScriptedModel([say("One."), say("Two.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "first"})
    await socket.run_to_completion()
    await socket.send({"type": "user_message", "content": "second"})
    await socket.run_to_completion()
    seen = [
        (m.role.value, m.content) for m in model.requests[1].messages if m.role.value != "system"
    ]
    assert seen == [("user", "first"), ("assistant", "One."), ("user", "second")]
