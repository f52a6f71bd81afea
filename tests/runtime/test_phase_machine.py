"""The exclusive request phase and its legal moves (docs/runtime.md, Phases)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType, AgentPhase, check_transition
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension

from .support import Observer, ProbeModel, answer, call, calls, close_at, lookup, parked_turn

P = AgentPhase
T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
ACTIVE = {P.LOADING_CONTEXT, P.READY, P.COMPACTING, P.GENERATING, P.RUNNING_TOOL}
LEGAL = (
    {
        (P.CREATED, P.LOADING_CONTEXT),
        (P.LOADING_CONTEXT, P.READY),
        (P.READY, P.COMPACTING),
        (P.COMPACTING, P.READY),
        (P.READY, P.GENERATING),
        (P.GENERATING, P.READY),
        (P.READY, P.RUNNING_TOOL),
        (P.RUNNING_TOOL, P.READY),
        (P.READY, P.COMPLETED),
    }
    | {(active, P.FAILED) for active in ACTIVE}
    | {(active, P.CANCELLED) for active in ACTIVE}
)
EVERY_PAIR = list(itertools.product(AgentPhase, repeat=2))


@pytest.mark.parametrize(
    ("current", "target"),
    [pair for pair in EVERY_PAIR if pair in LEGAL],
    ids=lambda phase: phase.value,
)
def test_a_legal_move_is_accepted(current, target):
    check_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [pair for pair in EVERY_PAIR if pair not in LEGAL],
    ids=lambda phase: phase.value,
)
def test_any_other_move_is_a_protocol_error(current, target):
    with pytest.raises(AgentProtocolError, match=f"{current.value}.*{target.value}"):
        check_transition(current, target)


def test_only_the_terminal_phases_are_terminal():
    assert {p for p in AgentPhase if p.is_terminal} == {P.COMPLETED, P.FAILED, P.CANCELLED}
    assert {p for p in AgentPhase if p.is_active} == ACTIVE


async def test_a_direct_answer_moves_through_the_documented_phases():
    phases = Observer()
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[phases])
    await agent.run("hi", config=CONFIG)
    assert phases.moves == [
        (P.CREATED, P.LOADING_CONTEXT),
        (P.LOADING_CONTEXT, P.READY),
        (P.READY, P.GENERATING),
        (P.GENERATING, P.READY),
        (P.READY, P.COMPLETED),
    ]


async def test_a_tool_turn_passes_through_running_tool_and_back():
    phases = Observer()
    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[phases])
    await agent.run("hi", config=CONFIG)
    assert phases.moves[4:6] == [(P.READY, P.RUNNING_TOOL), (P.RUNNING_TOOL, P.READY)]


async def test_every_published_move_is_legal_and_timestamped_in_order():
    phases = Observer()
    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[phases])
    await agent.run("hi", config=CONFIG)
    for move in phases.transitions:
        check_transition(move.previous_phase, move.current_phase)
        assert move.occurred_at.tzinfo is not None
    stamps = [m.monotonic_ns for m in phases.transitions]
    assert stamps == sorted(stamps)
    assert all(
        later.previous_phase is earlier.current_phase
        for earlier, later in itertools.pairwise(phases.transitions)
    )


async def test_hooks_see_the_current_phase_in_the_context_state():
    seen: dict[str, AgentPhase] = {}

    class Look(AgentExtension):
        async def on_tool(self, context):
            seen["on_tool"] = context.state.phase

        async def before_run(self, context):
            seen["before_run"] = context.state.phase

        async def before_tool(self, context, call):
            seen["before_tool"] = context.state.phase

        async def on_tool_call(self, context, call, call_next):
            seen["on_tool_call"] = context.state.phase
            return await call_next(call)

        async def on_success(self, context, result):
            seen["on_success"] = context.state.phase

    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[Look()])
    await agent.run("hi", config=CONFIG)
    assert seen == {
        "on_tool": P.LOADING_CONTEXT,
        "before_run": P.READY,
        "before_tool": P.READY,
        "on_tool_call": P.RUNNING_TOOL,
        "on_success": P.READY,
    }


async def test_a_failure_ends_in_failed_from_the_phase_it_happened_in():
    phases = Observer()

    async def broken(request):
        raise ConnectionError("gone")
        yield  # pragma: no cover

    agent = await Agent.create(ProbeModel(broken), extensions=[phases])
    with pytest.raises(ConnectionError):
        await agent.run("hi", config=CONFIG)
    assert phases.moves[-1] == (P.GENERATING, P.FAILED)


async def test_a_cancellation_ends_in_cancelled_from_the_phase_it_happened_in():
    phases = Observer()
    agent = await Agent.create(ProbeModel(answer("a b c")), extensions=[phases])
    await close_at(agent, "hi", T.MODEL_STARTED, config=CONFIG)
    assert phases.moves[-1] == (P.GENERATING, P.CANCELLED)


async def test_the_live_state_phase_tracks_the_request():
    reached, release = asyncio.Event(), asyncio.Event()
    agent = await Agent.create(ProbeModel(parked_turn(reached, release)), extensions=[])
    task = asyncio.create_task(agent.run("hi", config=CONFIG))
    await reached.wait()
    assert agent.get_state("s").phase is P.GENERATING
    release.set()
    await task
    assert agent.get_state("s").phase is P.COMPLETED
