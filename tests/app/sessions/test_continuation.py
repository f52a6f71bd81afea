"""Runs outlive their worker: a run left ``running`` by a dead process is continued.

Each test leaves the database as a worker killed at a precise point would (the user's
message, the answers and tool results stored so far, the run row still ``running``, no
lease), then touches the session the way a worker does — a socket joining, or the sweep
that runs without any socket — and checks that the run goes on with the same request id,
``run_continued`` first, and that what is stored is the whole answer once.
"""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group

from agent_app.assistants import Assistant, register, registry
from agent_app.durable.continuation import STARTED_TOOL_CONTENT
from agent_app.durable.store import RowMeta, append_rows
from agent_app.models import ChatMessage, ChatRun, ChatSession, RunStatus
from agent_app.sessions.background import sweep
from agent_app.sessions.registry import live_sessions
from tests.app.conftest import events_of, new_browser
from tests.app.llm_doubles import call_tool, say
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage, content_text
from zett_agent.testing import ScriptedModel
from zett_agent.tools import tool

pytestmark = pytest.mark.django_db(transaction=True)

RAN: list[str] = []


@tool(idempotent=True)
def look_up(city: str) -> str:
    """Look up the weather of a city.

    Guidelines:
        Use it for weather questions.
    """
    RAN.append(f"look_up:{city}")
    return f"Sunny in {city}"


@tool
def send_mail(to: str) -> str:
    """Send a mail.

    Guidelines:
        Only when asked to.
    """
    RAN.append(f"send_mail:{to}")
    return f"sent to {to}"


@tool(atomic=True)
def make_group(label: str) -> str:
    """Create a group.

    Guidelines:
        Only when asked to.
    """
    Group.objects.create(name=label)
    if label.startswith("bad"):
        raise ValueError("refused")
    return f"group {label}"


class Keeper(Assistant):
    id = "keeper"
    name = "Keeper"
    instructions = "You keep going."
    tools = [look_up, send_mail, make_group]


@pytest.fixture(autouse=True)
def keeper():
    RAN.clear()
    register(Keeper)
    yield
    registry.unregister("keeper")


@sync_to_async
def leave_a_dead_run(
    browser_key: str, messages: list, *, attempts: int = 1, started_call: str = ""
) -> tuple[str, str]:
    """A session whose run's worker died after ``messages`` were stored (and, with
    ``started_call``, after it started that call of a tool that must not run twice)."""
    session = ChatSession.objects.create(title="t", browser_key=browser_key, assistant="keeper")
    request_id = str(uuid.uuid4())
    ChatRun.objects.create(
        request_id=request_id,
        session=session,
        worker="dead:1:boot",
        attempts=attempts,
        started_call=started_call,
    )
    append_rows(str(session.pk), request_id, [(message, RowMeta()) for message in messages])
    return str(session.pk), request_id


@sync_to_async
def stored(session_id: str) -> list[tuple[str, str]]:
    rows = ChatMessage.objects.filter(session_id=session_id).order_by("position")
    return [(row.role, content_text(row.content) if row.content else "") for row in rows]


@sync_to_async
def run_row(request_id: str) -> ChatRun:
    return ChatRun.objects.get(request_id=request_id)


def seen_results(model: ScriptedModel) -> dict[str, ToolMessage]:
    return {
        message.tool_call_id: message
        for request in model.requests
        for message in request.messages
        if isinstance(message, ToolMessage)
    }


async def test_a_run_killed_mid_text_is_continued_on_join_with_the_same_request(sockets, use_model):
    from agent_app.telemetry import metrics

    use_model(ScriptedModel([say("The whole answer.")]))
    cookie, key = await new_browser()
    session_id, request_id = await leave_a_dead_run(key, [UserMessage("Tell me")])
    counted = metrics.CONTINUED._value.get() if metrics.ENABLED else None
    socket = await sockets(session_id, cookie=cookie)
    continued = await socket.expect("run_continued")
    if metrics.ENABLED:  # zett_runs_continued_total
        assert metrics.CONTINUED._value.get() == counted + 1
    assert continued == {
        "type": "run_continued",
        "seq": continued["seq"],
        "request_id": request_id,
        "attempt": 2,
        "position": 1,
    }
    assert socket.session_frame["active_request_id"] == request_id
    # What the run stored before it died is history: its replay starts at run_continued.
    assert [m["content"] for m in socket.session_frame["history"]] == ["Tell me"]
    frames = await socket.run_to_completion()
    assert all(frame.get("request_id") == request_id for frame in frames if "request_id" in frame)
    seqs = [continued["seq"]] + [frame["seq"] for frame in frames if "seq" in frame]
    assert seqs == sorted(set(seqs))
    assert not any(frame["type"] == "run_interrupted" for frame in frames)
    assert await stored(session_id) == [("user", "Tell me"), ("assistant", "The whole answer.")]
    run = await run_row(request_id)
    assert (run.status, run.attempts) == (RunStatus.COMPLETED, 2)


async def test_the_call_that_may_have_run_is_not_run_again_and_the_rest_run(sockets, use_model):
    model = use_model(ScriptedModel([say("Done.")]))
    cookie, key = await new_browser()
    calls = (
        ToolCall("c1", "look_up", {"city": "Oslo"}),
        ToolCall("c2", "send_mail", {"to": "a@b"}),
        ToolCall("c3", "send_mail", {"to": "c@d"}),
    )
    session_id, _ = await leave_a_dead_run(
        key,
        [
            UserMessage("Do it"),
            AssistantMessage(tool_calls=calls),
            ToolMessage("c1", "look_up", "Sunny in Oslo"),
        ],
        started_call="c2",
    )
    socket = await sockets(session_id, cookie=cookie)
    await socket.expect("run_continued")
    await socket.run_to_completion()
    results = seen_results(model)
    assert results["c2"].content == STARTED_TOOL_CONTENT and not results["c2"].success
    assert results["c3"].content == "sent to c@d"
    assert RAN == ["send_mail:c@d"]  # c2 may have run: never again; c3 never started
    rows = await stored(session_id)
    assert [role for role, _ in rows].count("tool") == 3
    assert rows[-1] == ("assistant", "Done.")


async def test_a_call_that_never_started_runs_after_the_crash(sockets, use_model):
    model = use_model(ScriptedModel([say("Sent.")]))
    cookie, key = await new_browser()
    session_id, _ = await leave_a_dead_run(
        key, [UserMessage("Mail"), call_tool("send_mail", "c1", to="a@b")]
    )  # the worker died after the model's answer was stored, before the call started
    socket = await sockets(session_id, cookie=cookie)
    await socket.expect("run_continued")
    await socket.run_to_completion()
    assert RAN == ["send_mail:a@b"]
    assert seen_results(model)["c1"].content == "sent to a@b"


async def test_a_started_call_is_recorded_before_it_runs(sockets, use_model):
    from agent_app.models import ChatRun as Runs

    use_model(ScriptedModel([call_tool("send_mail", "c9", to="x@y"), say("Sent.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Mail", "assistant": "keeper"})
    frames = await socket.run_to_completion()
    request_id = frames[-1]["request_id"]
    assert (await Runs.objects.aget(request_id=request_id)).started_call == "c9"


async def test_an_idempotent_tool_cut_off_is_run_again(sockets, use_model):
    model = use_model(ScriptedModel([say("It is sunny.")]))
    cookie, key = await new_browser()
    session_id, _ = await leave_a_dead_run(
        key, [UserMessage("Weather?"), call_tool("look_up", "c1", city="Oslo")]
    )
    socket = await sockets(session_id, cookie=cookie)
    await socket.expect("run_continued")
    await socket.run_to_completion()
    assert RAN == ["look_up:Oslo"]
    assert seen_results(model)["c1"].content == "Sunny in Oslo"


async def test_an_atomic_tool_commits_its_writes_with_its_result_once(sockets, use_model):
    use_model(ScriptedModel([call_tool("make_group", "c1", label="crew"), say("Made.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Make it", "assistant": "keeper"})
    frames = await socket.run_to_completion()
    completed = next(e for e in events_of(frames) if e["type"] == "tool_completed")
    assert completed["message"]["content"] == "group crew"
    assert await Group.objects.filter(name="crew").acount() == 1
    rows = await stored(socket.session_id)
    assert rows.count(("tool", "group crew")) == 1


async def test_an_atomic_tool_that_fails_leaves_no_write(sockets, use_model):
    use_model(ScriptedModel([call_tool("make_group", "c1", label="bad-one"), say("Oh.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Make it", "assistant": "keeper"})
    frames = await socket.run_to_completion()
    failed = next(e for e in events_of(frames) if e["type"] == "tool_failed")
    assert "refused" in failed["message"]["content"]
    assert not await Group.objects.filter(name="bad-one").aexists()
    rows = await stored(socket.session_id)
    assert [role for role, _ in rows].count("tool") == 1


async def test_an_atomic_tool_without_a_result_wrote_nothing_and_runs_again(sockets, use_model):
    use_model(ScriptedModel([say("Made.")]))
    cookie, key = await new_browser()
    session_id, _ = await leave_a_dead_run(
        key, [UserMessage("Make"), call_tool("make_group", "c1", label="crew")]
    )
    socket = await sockets(session_id, cookie=cookie)
    await socket.expect("run_continued")
    await socket.run_to_completion()
    assert await Group.objects.filter(name="crew").acount() == 1


async def test_a_run_out_of_attempts_ends_interrupted(sockets, use_model, settings):
    settings.ZETT_RUN_ATTEMPTS = 3
    use_model(ScriptedModel([say("never")]))
    cookie, key = await new_browser()
    session_id, request_id = await leave_a_dead_run(key, [UserMessage("Hi")], attempts=3)
    socket = await sockets(session_id, cookie=cookie)
    (run,) = socket.session_frame["runs"]  # settled before the socket joined
    assert (run["request_id"], run["status"]) == (request_id, "interrupted")
    assert socket.session_frame["active_request_id"] is None
    assert (await run_row(request_id)).status == RunStatus.INTERRUPTED


async def test_the_sweep_continues_a_run_nobody_watches(sockets, use_model):
    use_model(ScriptedModel([say("Finished alone.")]))
    cookie, key = await new_browser()
    session_id, request_id = await leave_a_dead_run(key, [UserMessage("Go on")])
    registry = live_sessions()
    assert await sweep(registry) == 1
    live = registry.get(session_id)
    assert live is not None
    await live.wait_for_run()
    assert await stored(session_id) == [("user", "Go on"), ("assistant", "Finished alone.")]
    assert (await run_row(request_id)).status == RunStatus.COMPLETED
    assert await sweep(registry) == 0  # nothing left to do
    page = await sockets(session_id, cookie=cookie)
    assert page.session_frame["history"][-1]["content"] == "Finished alone."


async def test_the_sweep_leaves_a_live_run_alone(sockets, use_model):
    from tests.app.llm_doubles import SteppedModel

    model = use_model(SteppedModel(["a ", "b "]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Count"})
    model.step(1)
    await socket.until(lambda f: f.get("event", {}).get("delta") == "a ")
    assert await sweep(live_sessions()) == 0
    model.finish()
    await socket.run_to_completion()


def test_over_ag_ui_a_continued_run_keeps_its_run_id_and_says_so():
    from agent_app.agui.encoder import RunEncoder

    request_id = "r-1"

    def event(seq: int, **fields) -> dict:
        return {"type": "agent_event", "seq": seq, "request_id": request_id, "event": fields}

    frames = [
        {"type": "run_started", "seq": 1, "request_id": request_id, "content": "Hi"},
        event(2, type="model_started"),
        event(3, type="text_delta", delta="half an ans"),
        # The worker died here; another one continues the same run.
        {
            "type": "run_continued",
            "seq": 1001,
            "request_id": request_id,
            "attempt": 2,
            "position": 1,
        },
        event(1002, type="model_started"),
        event(1003, type="text_delta", delta="The whole answer."),
        event(1004, type="run_completed"),
    ]
    events = RunEncoder("thread-1").encode_all(frames)
    kinds = [e.type for e in events]
    assert kinds.count("RUN_STARTED") == 1 and "RUN_ERROR" not in kinds
    assert {e.data["runId"] for e in events if "runId" in e.data} == {request_id}
    continued = next(i for i, e in enumerate(events) if e.data.get("name") == "zett.run_continued")
    assert events[continued].data["value"]["attempt"] == 2
    assert kinds[continued - 1] == "TEXT_MESSAGE_END"  # the half-written message ends first
    assert kinds[-1] == "RUN_FINISHED"
    texts = [e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT"]
    assert texts == ["half an ans", "The whole answer."]
    ids = [e.id for e in events if e.id is not None]
    assert ids == sorted(set(ids))


class Tallier:
    """Asked anything, calls ``tally`` three times (one call a turn), then answers."""

    async def stream(self, request):
        from zett_agent.model import ModelEvent, ModelResponse

        done = 0
        for message in reversed(request.messages):
            if isinstance(message, ToolMessage) and message.name == "tally":
                done += 1
            elif isinstance(message, UserMessage):
                break
        if done < 3:
            call = ToolCall(f"t-{uuid.uuid4().hex[:10]}", "tally", {"number": done + 1})
            message = AssistantMessage(tool_calls=(call,))
            yield ModelEvent.completed(ModelResponse(message, finish_reason="tool_calls"))
            return
        for word in ("all ", "three ", "done"):
            yield ModelEvent.text(word)
        yield ModelEvent.completed(ModelResponse(AssistantMessage("all three done")))


@tool(atomic=True)
def tally(number: int) -> str:
    """Count a step.

    Guidelines:
        Once a step.
    """
    from zett_agent.tools.base import current_run_context

    Group.objects.create(name=f"{current_run_context().request_id} {number}")
    return f"tallied {number}"


class CounterAssistant(Assistant):
    id = "counter"
    name = "Counter"
    instructions = "Count."
    tools = [tally]


@pytest.mark.slow
async def test_two_hundred_handovers_at_random_points_leave_each_atomic_effect_once(
    use_model, settings
):
    import asyncio
    import random

    from agent_app.durable.runs import Creator

    settings.ZETT_RUN_ATTEMPTS = 1000
    register(CounterAssistant)
    try:
        use_model(Tallier())
        sessions = live_sessions()
        rng = random.Random(38)
        _, key = await new_browser()
        handovers = 0
        runs: list[str] = []
        while handovers < 200:
            session_id = str(uuid.uuid4())
            await ChatSession.objects.acreate(pk=session_id, browser_key=key, assistant="counter")
            live = sessions.session(session_id)
            runs.append(await live.start("count", Creator(browser_key=key)))
            while live.run is not None or await sweep(sessions):
                live = sessions.session(session_id)
                if live.run is None:
                    continue
                await asyncio.sleep(rng.uniform(0, 0.03))  # a random moment of the run
                if live.run is not None and live.run.task is not None:
                    await live.run.step_aside()  # stops as a killed worker would
                    handovers += 1
        for request_id in runs:
            run = await run_row(request_id)
            rows = await stored(run.session_id)
            assert run.status == RunStatus.COMPLETED, (run.status, run.attempts, rows)
            names = [
                name
                async for name in Group.objects.filter(name__startswith=request_id).values_list(
                    "name", flat=True
                )
            ]
            assert sorted(names) == [f"{request_id} {n}" for n in (1, 2, 3)]  # 0 lost, 0 twice
            run = await run_row(request_id)
            assert run.status == RunStatus.COMPLETED
        assert handovers >= 200
    finally:
        registry.unregister("counter")
        await live_sessions().close()


async def test_the_lifespan_of_an_asgi_server_starts_the_sweep():
    import asyncio

    from agent_app.asgi import lifespan_application

    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict] = []

    async def receive() -> dict:
        return messages.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    from agent_app.process import loops

    ran = asyncio.Event()

    async def probe() -> None:  # a loop the app registered for every worker
        ran.set()
        await asyncio.Event().wait()

    loops.register("test-probe", lambda: probe)
    try:
        await asyncio.wait_for(lifespan_application()({"type": "lifespan"}, receive, send), 10)
        await asyncio.wait_for(ran.wait(), 10)
    finally:
        loops._loops.pop("test-probe", None)
    assert [m["type"] for m in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    registry = live_sessions()
    assert registry.background.running
    await registry.close()
    assert not registry.background.running
