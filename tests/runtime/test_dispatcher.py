"""``AgentEventDispatcher``: one typed callback per event type."""

from __future__ import annotations

import pytest

from zett_agent.dispatcher import AgentEventDispatcher
from zett_agent.events import AgentEvent, AgentEventType

T = AgentEventType


def example(kind: AgentEventType) -> AgentEvent:
    if kind is T.CUSTOM:
        return AgentEvent(kind, "s", name="x", payload={})
    return AgentEvent(kind, "s")


@pytest.mark.parametrize("kind", list(AgentEventType), ids=lambda kind: kind.value)
async def test_each_event_type_reaches_its_own_callback(kind):
    seen: list[tuple[str, AgentEvent]] = []
    method = f"on_{kind.value}_event"

    async def record(self, event):
        seen.append((method, event))

    Recorder = type("Recorder", (AgentEventDispatcher,), {method: record})
    event = example(kind)
    await Recorder().dispatch(event)
    assert seen == [(method, event)]


async def test_every_event_type_has_a_no_op_default():
    dispatcher = AgentEventDispatcher()
    for kind in AgentEventType:
        assert hasattr(dispatcher, f"on_{kind.value}_event")
        assert await dispatcher.dispatch(example(kind)) is None


async def test_only_the_matching_callback_runs():
    seen: list[str] = []

    class Ui(AgentEventDispatcher):
        async def on_text_delta_event(self, event):
            seen.append(event.delta)

        async def on_custom_event(self, event):
            seen.append(event.name)

    ui = Ui()
    await ui.dispatch(AgentEvent(T.TEXT_DELTA, "s", delta="hi"))
    await ui.dispatch(AgentEvent(T.MODEL_STARTED, "s"))
    await ui.dispatch(AgentEvent(T.CUSTOM, "s", name="progress"))
    assert seen == ["hi", "progress"]


async def test_callback_errors_propagate_to_the_caller():
    boom = RuntimeError("render failed")

    class Broken(AgentEventDispatcher):
        async def on_run_completed_event(self, event):
            raise boom

    with pytest.raises(RuntimeError) as caught:
        await Broken().dispatch(AgentEvent(T.RUN_COMPLETED, "s"))
    assert caught.value is boom
