"""Runs outlive sockets: reload, reconnect, a second tab, paged history, frame sizes.

A watcher socket that stays connected through a whole run sees every frame of it; the
sockets a test drops and reopens must together see exactly those frames — same ``seq``,
none lost, none twice. The model is stepped by the test (``SteppedModel``), so each socket
is dropped at a precise point of the stream without waiting for time to pass.
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from agent_app.durable.history import SESSION_FRAME_BUDGET
from agent_app.durable.store import row_fields
from agent_app.models import ChatMessage, ChatSession
from agent_app.protocol.frames import MAX_OUTBOUND_BYTES
from tests.app.conftest import new_browser
from tests.app.llm_doubles import GatedModel, SteppedModel, call_tool, completed, say
from zett_agent.messages import AssistantMessage, UserMessage
from zett_agent.model import ModelEvent
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)

#: Paging through a whole long session at once costs more than the default frame budget
#: (a page is charged by its size): these tests are about the pages, not the budget.
PAGING_BUDGET = {"burst": 10_000, "per_second": 10_000.0}

WORDS = [f"w{i} " for i in range(30)]


def run_frames(frames: list[dict]) -> list[dict]:
    """The frames that carry ``seq`` (everything every socket of the session receives)."""
    return [frame for frame in frames if "seq" in frame]


async def frames_until_seq(socket, seq: int) -> list[dict]:
    return await socket.until(lambda frame: frame.get("seq", -1) >= seq)


async def test_a_reload_mid_stream_resumes_the_same_run_without_loss_or_repeats(sockets, use_model):
    model = use_model(SteppedModel(WORDS))
    watcher = await sockets()
    tab = await sockets(watcher.session_id)
    await tab.send({"type": "user_message", "content": "Count"})
    model.step(5)
    seen = run_frames(await tab.until(lambda f: f.get("event", {}).get("delta") == "w4 "))
    await tab.close()
    model.step(5)  # these frames happen while the tab is away
    expected = run_frames(await watcher.until(lambda f: f.get("event", {}).get("delta") == "w9 "))
    back = await sockets(watcher.session_id, after_seq=seen[-1]["seq"])
    assert back.session_frame["active_request_id"] == seen[0]["request_id"]
    assert back.session_frame["history"] == []  # the running run is rebuilt by the replay
    model.finish()
    expected += run_frames(await watcher.run_to_completion())
    seen += run_frames(await back.run_to_completion())
    assert [f["seq"] for f in seen] == [f["seq"] for f in expected]
    assert seen == expected
    seqs = [f["seq"] for f in seen]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # contiguous


async def test_a_page_opened_mid_run_gets_the_whole_run_from_its_start(sockets, use_model):
    model = use_model(SteppedModel(WORDS[:6]))
    first = await sockets()
    await first.send({"type": "user_message", "content": "Count"})
    model.step(3)
    before = run_frames(await first.until(lambda f: f.get("event", {}).get("delta") == "w2 "))
    late = await sockets(first.session_id)  # no after_seq: a fresh page
    replayed = run_frames(await late.until(lambda f: f.get("seq") == before[-1]["seq"]))
    assert replayed == before
    assert replayed[0]["type"] == "run_started" and replayed[0]["content"] == "Count"
    model.finish()
    assert run_frames(await late.run_to_completion()) == run_frames(await first.run_to_completion())


async def test_twenty_reconnects_during_one_run_lose_and_repeat_nothing(sockets, use_model):
    model = use_model(SteppedModel(WORDS))
    watcher = await sockets()
    await watcher.send({"type": "user_message", "content": "Count"})
    expected: list[dict] = []
    seen: list[dict] = []
    rng = random.Random(20)
    for _ in range(20):
        socket = await sockets(watcher.session_id, after_seq=seen[-1]["seq"] if seen else None)
        model.step(1)
        expected_now = run_frames(await watcher.until(lambda f: "delta" in f.get("event", {})))
        expected += expected_now
        seen += run_frames(await frames_until_seq(socket, expected[-1]["seq"]))
        if rng.random() < 0.5:
            model.step(1)  # a frame arrives while nobody but the watcher is connected
            expected += run_frames(await watcher.until(lambda f: "delta" in f.get("event", {})))
        await socket.close()
    last = await sockets(watcher.session_id, after_seq=seen[-1]["seq"])
    model.finish()
    expected += run_frames(await watcher.run_to_completion())
    seen += run_frames(await last.run_to_completion())
    assert seen == expected


async def test_closing_every_socket_lets_the_run_finish_and_be_stored(sockets, use_model):
    model = use_model(SteppedModel(WORDS[:4]))
    tab = await sockets()
    await tab.send({"type": "user_message", "content": "Count"})
    model.step(2)
    await tab.until(lambda f: f.get("event", {}).get("delta") == "w1 ")
    await tab.close()
    model.finish()
    await model.closed.wait()
    again = await sockets(tab.session_id)
    while again.session_frame["active_request_id"]:
        await again.run_to_completion()
        again = await sockets(tab.session_id)
    history = again.session_frame["history"]
    assert [m["content"] for m in history] == ["Count", "w0 w1 w2 w3 "]
    assert again.session_frame["runs"][0]["status"] == "completed"


async def test_every_tab_sees_run_started_before_the_run_and_replies_from_the_other(
    sockets, use_model
):
    use_model(ScriptedModel([call_tool("ask_user", "ask-1", question="City?"), say("Rome it is.")]))
    one = await sockets()
    two = await sockets(one.session_id)
    await one.send({"type": "user_message", "content": "Plan"})
    for tab in (one, two):
        started = await tab.expect("run_started")
        assert started["content"] == "Plan"
        await tab.until_event("custom", "ask_user")
    reply = {"tool_call_id": "ask-1", "answer": "Rome"}
    await two.send({"type": "external_event", "name": "ask_user_response", "payload": reply})
    result = await two.expect("external_event_result", accepted_by=["AskUserExtension"])
    assert result["reason"] is None
    accepted = await one.expect("reply_accepted", name="ask_user_response")
    assert (accepted["correlation_id"], accepted["payload"]) == ("ask-1", reply)
    await two.expect("reply_accepted", name="ask_user_response")
    assert (await one.run_to_completion())[-1]["event"]["message"]["content"] == "Rome it is."
    await two.run_to_completion()


async def test_two_tabs_sending_at_once_start_exactly_one_run(sockets, use_model):
    gate = asyncio.Event()
    use_model(GatedModel([ModelEvent.text("one"), gate, completed("one")]))
    one = await sockets()
    two = await sockets(one.session_id)
    await asyncio.gather(
        one.send({"type": "user_message", "content": "from one"}),
        two.send({"type": "user_message", "content": "from two"}),
    )
    # Both tabs see the one run start; the other tab's refusal may come before or after
    # that broadcast (on Redis the broadcast takes a round trip), so wait for it by name.
    seen = {tab: await tab.until(lambda f: f["type"] == "run_started") for tab in (one, two)}
    (started,) = {frames[-1]["request_id"] for frames in seen.values()}
    content = seen[one][-1]["content"]
    refused_tab = two if content == "from one" else one
    busy = [f for f in seen[refused_tab] if f["type"] == "error"]
    if not busy:
        busy = [(await refused_tab.until(lambda f: f["type"] == "error"))[-1]]
    assert [f["code"] for f in busy] == ["busy"]
    starter = one if refused_tab is two else two
    assert not [f for f in seen[starter] if f["type"] == "error"]
    gate.set()
    rest = await one.run_to_completion() + await two.run_to_completion()
    assert {f["request_id"] for f in rest if f["type"] == "run_started"} <= {started}
    rows = [m.content async for m in ChatMessage.objects.filter(role="user")]
    assert rows == [content]  # the refused text was never stored, never became a steer


async def test_a_steer_while_a_question_waits_is_queued_and_shown_to_every_tab(sockets, use_model):
    use_model(
        ScriptedModel([call_tool("ask_user", "ask-1", question="City?"), say("Going to Oslo.")])
    )
    one = await sockets()
    two = await sockets(one.session_id)
    await one.send({"type": "user_message", "content": "Plan"})
    await one.until_event("custom", "ask_user")
    await two.until_event("custom", "ask_user")
    await one.send({"type": "steer", "content": "Make it Oslo"})
    await one.expect("external_event_result", accepted_by=["SteeringExtension"])
    queued = await two.expect("reply_accepted", name="steering_message")
    assert queued["payload"] == {"content": "Make it Oslo"}
    await one.send({"type": "cancel"})
    cancelled = await two.until_event("run_cancelled")
    assert cancelled[-1]["type"] == "run_cancelled"


# --- paged history ----------------------------------------------------------------------


async def fill(session_id: str, messages: list) -> None:
    await ChatMessage.objects.abulk_create(
        ChatMessage(session_id=session_id, position=i, **row_fields(m))
        for i, m in enumerate(messages)
    )


async def all_pages(socket) -> list[dict]:
    """Every stored message the socket can reach: the session frame, then page after page."""
    frame = socket.session_frame
    messages = list(frame["history"])
    more = frame["has_more_history"]
    while more:
        await socket.send(
            {"type": "history_before", "position": messages[0]["position"], "limit": 100}
        )
        page = await socket.expect("history_page")
        assert page["messages"], "a page that says there is more must bring some"
        messages = page["messages"] + messages
        more = page["has_more"]
    return messages


async def test_a_long_session_opens_with_its_newest_page_and_pages_back_to_the_start(
    sockets, use_model, settings
):
    settings.ZETT_WS_RATE_LIMIT = PAGING_BUDGET
    use_model(ScriptedModel())
    cookie, key = await new_browser()
    session = await ChatSession.objects.acreate(browser_key=key)
    total = 260
    await fill(
        str(session.pk),
        [UserMessage(f"q{i}") if i % 2 == 0 else AssistantMessage(f"a{i}") for i in range(total)],
    )
    socket = await sockets(str(session.pk), cookie=cookie)
    frame = socket.session_frame
    assert len(frame["history"]) == 50 and frame["has_more_history"]
    assert frame["history"][-1]["position"] == total - 1
    assert frame["history"][-1]["created_at"].endswith("Z")
    reached = await all_pages(socket)
    assert [m["position"] for m in reached] == list(range(total))


async def test_a_session_of_huge_messages_opens_small_and_everything_stays_reachable(
    sockets, use_model, settings
):
    settings.ZETT_WS_RATE_LIMIT = PAGING_BUDGET
    use_model(ScriptedModel())
    cookie, key = await new_browser()
    session = await ChatSession.objects.acreate(browser_key=key)
    await fill(str(session.pk), [UserMessage(f"{i} " + "z" * 30_000) for i in range(80)])
    from channels.testing import WebsocketCommunicator

    from tests.app.conftest import RECEIVE_TIMEOUT
    from zett_site.asgi import application

    communicator = WebsocketCommunicator(
        application, f"/ws/sessions/{session.pk}/", headers=[(b"cookie", cookie.encode())]
    )
    await communicator.connect(timeout=RECEIVE_TIMEOUT)
    raw = await communicator.receive_from(timeout=RECEIVE_TIMEOUT)
    await communicator.disconnect()
    assert len(raw.encode()) < 64 * 1024
    assert len(json.loads(raw)["history"]) >= 1
    socket = await sockets(str(session.pk), cookie=cookie)
    reached = await all_pages(socket)
    assert [m["position"] for m in reached] == list(range(80))
    assert all(len(m["content"]) > 30_000 for m in reached)  # none had to be cut


async def test_history_before_checks_its_fields(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets()
    await socket.send({"type": "history_before", "position": -1})
    await socket.expect_error("bad_frame")
    await socket.send({"type": "history_before", "position": 3, "limit": 1000})
    await socket.expect_error("bad_frame")
    await socket.send({"type": "history_before", "position": 3})
    assert await socket.expect("history_page") == {
        "type": "history_page",
        "messages": [],
        "runs": [],
        "has_more": False,
    }


# --- frame sizes ------------------------------------------------------------------------


async def test_an_answer_over_a_mebibyte_reaches_every_socket_and_is_stored_whole(
    sockets, use_model
):
    huge = "word " * 300_000  # 1.5 MB
    use_model(ScriptedModel([[ModelEvent.text(huge), completed(huge)]]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Write a lot"})
    frames = await socket.run_to_completion()
    largest = max(len(json.dumps(f, ensure_ascii=False).encode()) for f in frames)
    assert largest > SESSION_FRAME_BUDGET  # the delta itself is large …
    final = frames[-1]["event"]
    assert final["content_omitted"] is True and final["message"]["content"] == ""
    stored = await ChatMessage.objects.aget(role="assistant")
    assert stored.content == huge


def test_events_that_would_pass_512_kib_are_sent_shortened():
    from agent_app.protocol.frames import fit_event

    big = "x" * (600 * 1024)
    event = {
        "type": "tool_completed",
        "session_id": "s",
        "phase": "ready",
        "tool_calls": [],
        "message": {"role": "tool", "content": big, "tool_call_id": "c", "name": "t"},
    }
    fitted = fit_event(event)
    assert fitted["content_truncated"] is True
    assert len(json.dumps(fitted).encode()) < MAX_OUTBOUND_BYTES
    final = {"type": "run_completed", "session_id": "s", "message": {"content": big}}
    assert len(json.dumps(fit_event(final)).encode()) < MAX_OUTBOUND_BYTES


async def test_a_long_run_merges_its_buffered_deltas_and_still_replays_exactly(
    sockets, use_model, settings
):
    settings.ZETT_REPLAY_FRAMES = 8
    words = [f"t{i} " for i in range(40)]
    model = use_model(SteppedModel(words))
    watcher = await sockets()
    await watcher.send({"type": "user_message", "content": "Long"})
    model.step(30)
    await watcher.until(lambda f: f.get("event", {}).get("delta") == "t29 ")
    for resume_from in (None, 3, 10, 17):
        late = await sockets(watcher.session_id, after_seq=resume_from)
        frames = run_frames(
            await late.until(lambda f: f.get("event", {}).get("delta", "").endswith("t29 "))
        )
        text = "".join(f["event"].get("delta", "") for f in frames if f["type"] == "agent_event")
        first_word = 0 if resume_from is None else max(0, resume_from - 3)  # t0 is seq 4
        assert text == "".join(words[first_word:30])
        await late.close()
    model.finish()
    await watcher.run_to_completion()


async def test_a_session_being_joined_is_not_dropped_under_the_joining_socket(sockets, use_model):
    """A run ending (or a socket leaving) while another socket joins must not leave that
    socket on a session the registry no longer knows: the next socket would find no run,
    and a second run could start beside the first."""
    from agent_app.sessions.registry import live_sessions

    use_model(ScriptedModel())

    class Page:
        def __init__(self) -> None:
            self.frames: list[str] = []

        async def send_text(self, text: str) -> None:
            self.frames.append(text)

    registry = live_sessions()
    live = registry.session(str(__import__("uuid").uuid4()))
    page = Page()
    await live.feed.lock.acquire()  # the join waits here, as behind a frame being broadcast
    joining = asyncio.create_task(live.join(page))
    await asyncio.sleep(0)  # one turn of the loop: the join has begun and waits
    registry.drop_if_idle(live)  # what a run's end or another socket's leaving does
    assert registry.get(live.session_id) is live
    live.feed.lock.release()
    await joining
    assert page.frames and json.loads(page.frames[0])["type"] == "session"
    assert live.sockets == [page] and registry.get(live.session_id) is live
    live.leave(page)
    assert registry.get(live.session_id) is None
