"""An ``on_event`` listener that asks for fewer events hears only those, and an extension
that does not take part in a request is called for nothing in it; every other listener
still hears every event, with the timings it always had; a listener with ``_on_move``
hears its moves there, without events, unless another listener of the move needs the
event or its ``on_event`` is overridden (``zett_agent._hooks``)."""

from __future__ import annotations

import pytest

from tests.runtime.support import ProbeModel, add, answer, call, calls, collect
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import MessageAppendedEvent, PhaseTransitionEvent
from zett_agent.phases import AgentPhase

P = AgentPhase


class Hearing(AgentExtension):
    """Every event it hears: a phase moved into, or the role of an appended message."""

    def __init__(self) -> None:
        self.heard: list[object] = []
        self.timings: list[object] = []

    async def on_event(self, context, event) -> None:
        if isinstance(event, PhaseTransitionEvent):
            self.heard.append(event.current_phase)
        elif isinstance(event, MessageAppendedEvent):
            self.heard.append(event.message.role)
            self.timings.append(event.timing)


class MovesOnly(Hearing):
    _phase_events = frozenset({P.GENERATING, P.COMPLETED})
    _message_events = False


class Mover(MovesOnly):
    """Hears its moves in ``_on_move`` where the runtime builds no event for them."""

    def __init__(self) -> None:
        super().__init__()
        self.moved: list[object] = []

    async def on_event(self, context, event) -> None:
        await super().on_event(context, event)

    def _on_move(self, context, phase) -> None:
        self.moved.append((phase, context.state.phase))


class OverridingMover(Mover):
    async def on_event(self, context, event) -> None:
        await super().on_event(context, event)


class Gated(Hearing):
    def __init__(self, takes_part: bool) -> None:
        super().__init__()
        self.takes_part = takes_part
        self.asked = 0
        self.ran: list[str] = []

    def _takes_part(self, context) -> bool:
        self.asked += 1
        return self.takes_part

    async def before_run(self, context) -> None:
        self.ran.append("before_run")


async def run_tool_request(*extensions: AgentExtension) -> None:
    model = ProbeModel(calls(call("add", "call-1", a=1, b=2)), answer("three"))
    agent = await Agent.create(model, tools=[add], extensions=list(extensions))
    await collect(agent, "1+2?", config=AgentRunConfig(session_id="chat-1"))


async def test_a_listener_hears_only_the_moves_it_asked_for_and_no_messages():
    picky = MovesOnly()
    await run_tool_request(picky)
    assert picky.heard == [P.GENERATING, P.GENERATING, P.COMPLETED]


async def test_other_listeners_hear_everything_with_timings_beside_a_picky_one():
    alone, beside = Hearing(), Hearing()
    await run_tool_request(alone)
    await run_tool_request(MovesOnly(), beside)
    assert beside.heard == alone.heard
    assert P.READY in beside.heard and "tool" in beside.heard
    # The streamed answer's content segment is timed beside the picky listener too.
    timed = [timing.content_started_at is not None for timing in beside.timings]
    assert timed == [timing.content_started_at is not None for timing in alone.timings]
    assert any(timed)


async def test_an_extension_that_does_not_take_part_is_called_for_nothing():
    out, other = Gated(takes_part=False), Hearing()
    await run_tool_request(out, other)
    assert out.asked == 1
    assert out.heard == [] and out.ran == []
    assert other.heard[0] is P.LOADING_CONTEXT and other.heard[-1] is P.COMPLETED


async def test_an_extension_that_takes_part_hears_the_whole_request():
    taking = Gated(takes_part=True)
    await run_tool_request(taking)
    assert taking.asked == 1 and taking.ran == ["before_run"]
    assert taking.heard[0] is P.LOADING_CONTEXT and taking.heard[-1] is P.COMPLETED


async def test_a_mover_hears_its_moves_where_they_happen_without_events():
    mover = Mover()
    await run_tool_request(mover)
    assert mover.heard == []  # no event was built for it
    assert mover.moved == [(P.GENERATING, P.GENERATING)] * 2 + [(P.COMPLETED, P.COMPLETED)]


async def test_a_mover_beside_a_listener_of_the_same_moves_hears_them_in_order():
    order: list[str] = []

    class Labelled(Hearing):
        def __init__(self, label: str, priority: int) -> None:
            super().__init__()
            self.label, self.priority, self.name = label, priority, label

        async def on_event(self, context, event) -> None:
            await super().on_event(context, event)
            if getattr(event, "current_phase", None) is P.COMPLETED:
                order.append(self.label)

    class Ordered(Mover):
        def _on_move(self, context, phase) -> None:
            super()._on_move(context, phase)
            if phase is P.COMPLETED:
                order.append("mover")

    before, mover, after = Labelled("before", 10), Ordered(), Labelled("after", 2000)
    await run_tool_request(after, mover, before)
    assert mover.heard == []  # no event reached it: it heard the moves in ``_on_move``
    assert mover.moved == [(P.GENERATING, P.GENERATING)] * 2 + [(P.COMPLETED, P.COMPLETED)]
    assert before.heard[0] is P.LOADING_CONTEXT and before.heard[-1] is P.COMPLETED
    assert after.heard == before.heard
    assert order == ["before", "mover", "after"]


async def test_a_mover_whose_on_event_is_overridden_hears_events():
    overriding = OverridingMover()
    await run_tool_request(overriding)
    assert overriding.moved == []
    assert overriding.heard == [P.GENERATING, P.GENERATING, P.COMPLETED]


async def test_a_mover_that_raises_fails_the_request():
    class Failing(Mover):
        def _on_move(self, context, phase) -> None:
            if phase is P.COMPLETED:
                raise RuntimeError("refused")

    failing = Failing()
    errors: list[Exception] = []

    class Witness(AgentExtension):
        async def on_error(self, context, error) -> None:
            errors.append(error)

    with pytest.raises(RuntimeError, match="refused"):
        await run_tool_request(Witness(), failing)
    assert [str(error) for error in errors] == ["refused"]
