"""One agent serves many sessions at once, one active request per session (docs/runtime.md,
Requests)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig, AgentState
from zett_agent.events import AgentEventType, AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.messages import AssistantMessage, SystemMessage, UserMessage
from zett_agent.model import ModelEvent, ModelRequest

from .support import HookLog, ProbeModel, answer, collect, let_other_tasks_run

T = AgentEventType


class EchoModel:
    """Answers each request with the last user text, after an optional per-text gate."""

    def __init__(self, gates: dict[str, asyncio.Event] | None = None) -> None:
        self.gates = gates or {}
        self.waiting: dict[str, asyncio.Event] = {text: asyncio.Event() for text in self.gates}
        self.requests: list[ModelRequest] = []

    async def stream(self, request):
        self.requests.append(request)
        text = request.messages[-1].content
        if text in self.gates:
            self.waiting[text].set()
            await self.gates[text].wait()
        for event in answer(f"echo: {text}"):
            yield event


async def test_two_sessions_run_concurrently_and_finish_in_any_order():
    gates = {"first": asyncio.Event(), "second": asyncio.Event()}
    model = EchoModel(gates)
    agent = await Agent.create(model)
    first = asyncio.create_task(agent.run("first", config=AgentRunConfig(session_id="a")))
    second = asyncio.create_task(agent.run("second", config=AgentRunConfig(session_id="b")))
    await model.waiting["first"].wait()
    await model.waiting["second"].wait()
    assert agent.is_conflict("a") and agent.is_conflict("b")
    gates["second"].set()
    assert (await second).content == "echo: second"
    assert not first.done()
    gates["first"].set()
    assert (await first).content == "echo: first"


async def test_each_session_sees_only_its_own_events_and_history():
    model = EchoModel()
    agent = await Agent.create(model)
    events_a = await collect(agent, "alpha", config=AgentRunConfig(session_id="a"))
    events_b = await collect(agent, "beta", config=AgentRunConfig(session_id="b"))
    await agent.run("alpha again", config=AgentRunConfig(session_id="a"))
    assert {e.session_id for e in events_a} == {"a"}
    assert {e.session_id for e in events_b} == {"b"}
    history_a = [m.content for m in model.requests[2].messages if not isinstance(m, SystemMessage)]
    assert history_a == ["alpha", "echo: alpha", "alpha again"]


async def test_a_second_request_for_a_busy_session_is_refused_before_any_hook():
    gate = asyncio.Event()
    model = EchoModel({"first": gate})
    hooks = HookLog()
    agent = await Agent.create(model, extensions=[hooks])
    config = AgentRunConfig(session_id="busy")
    running = asyncio.create_task(agent.run("first", config=config))
    await model.waiting["first"].wait()
    with pytest.raises(AgentProtocolError, match="busy"):
        async with contextlib.aclosing(agent.stream("second", config=config)) as events:
            await anext(events)
    assert hooks.log.count("on_tool") == 1
    assert len(model.requests) == 1
    gate.set()
    assert (await running).content == "echo: first"


async def test_refusing_a_busy_session_leaves_the_running_request_untouched():
    gate = asyncio.Event()
    model = EchoModel({"first": gate})
    agent = await Agent.create(model)
    config = AgentRunConfig(session_id="busy")
    running = asyncio.create_task(agent.run("first", config=config))
    await model.waiting["first"].wait()
    with pytest.raises(AgentProtocolError):
        await agent.run("second", config=config)
    assert agent.is_conflict("busy") is True
    gate.set()
    await running
    assert agent.is_conflict("busy") is False
    assert (await agent.run("third", config=config)).content == "echo: third"


async def test_pending_and_is_conflict_follow_the_active_requests():
    gate = asyncio.Event()
    model = EchoModel({"slow": gate})
    agent = await Agent.create(model)
    assert agent.pending is False
    assert agent.is_conflict("s") is False
    running = asyncio.create_task(agent.run("slow", config=AgentRunConfig(session_id="s")))
    await model.waiting["slow"].wait()
    assert agent.pending is True
    assert agent.is_conflict("s") is True
    assert agent.is_conflict("other") is False
    gate.set()
    await running
    assert agent.pending is False
    assert agent.is_conflict("s") is False


async def test_get_state_reports_the_phase_and_messages_of_a_session():
    gate = asyncio.Event()
    model = EchoModel({"slow": gate})
    agent = await Agent.create(model)
    assert agent.get_state("s") is None
    running = asyncio.create_task(agent.run("slow", config=AgentRunConfig(session_id="s")))
    await model.waiting["slow"].wait()
    live = agent.get_state("s")
    assert isinstance(live, AgentState)
    assert live.phase is AgentPhase.GENERATING
    gate.set()
    await running
    done = agent.get_state("s")
    assert done.phase is AgentPhase.COMPLETED
    assert isinstance(done.messages, tuple)
    assert done.messages[-2:] == (
        UserMessage(content="slow"),
        AssistantMessage(content="echo: slow"),
    )
    assert agent.get_state("unknown") is None


async def test_state_messages_cannot_be_mutated_in_place():
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[])
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    messages = agent.get_state("s").messages
    with pytest.raises((TypeError, AttributeError)):
        messages.append(UserMessage(content="sneaky"))  # type: ignore[attr-defined]


async def test_a_shared_extension_stays_pending_until_every_agent_using_it_finishes():
    gates = {"one": asyncio.Event(), "two": asyncio.Event()}
    shared = HookLog()
    model_one, model_two = EchoModel({"one": gates["one"]}), EchoModel({"two": gates["two"]})
    agent_one = await Agent.create(model_one, extensions=[shared])
    agent_two = await Agent.create(model_two, extensions=[shared])
    first = asyncio.create_task(agent_one.run("one", config=AgentRunConfig(session_id="x")))
    second = asyncio.create_task(agent_two.run("two", config=AgentRunConfig(session_id="x")))
    await model_one.waiting["one"].wait()
    await model_two.waiting["two"].wait()
    assert shared.pending is True
    gates["one"].set()
    await first
    assert shared.pending is True
    gates["two"].set()
    await second
    assert shared.pending is False


async def test_many_sessions_interleave_their_deltas_without_mixing_them():
    class SlowWords:
        async def stream(self, request):
            text = request.messages[-1].content
            for word in text.split():
                yield ModelEvent.text(word + " ")
                await let_other_tasks_run(1)  # hand the loop to the other sessions
            for event in answer(text)[1:]:
                yield event

    agent = await Agent.create(SlowWords(), extensions=[])

    async def one(session: str) -> str:
        events = await collect(
            agent, f"{session} says one two three", config=AgentRunConfig(session_id=session)
        )
        assert {e.session_id for e in events} == {session}
        return "".join(e.delta for e in events if e.type is T.TEXT_DELTA)

    texts = await asyncio.gather(*(one(f"s{i}") for i in range(5)))
    assert texts == [f"s{i} says one two three " for i in range(5)]


async def test_finished_states_are_kept_for_the_most_recent_sessions_only(monkeypatch):
    """A long-lived agent does not keep the state of every session it ever served."""
    import zett_agent.agent as agent_module
    from zett_agent.messages import AssistantMessage
    from zett_agent.testing import ScriptedModel

    monkeypatch.setattr(agent_module, "FINISHED_STATES_KEPT", 2)
    model = ScriptedModel([AssistantMessage("one"), AssistantMessage("two"), AssistantMessage("3")])
    agent = await agent_module.Agent.create(model, extensions=[])
    for session in ("a", "b", "c"):
        await agent.run("hi", config=agent_module.AgentRunConfig(session_id=session))
    assert agent.get_state("a") is None
    assert agent.get_state("b") is not None and agent.get_state("c") is not None
