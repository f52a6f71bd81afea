"""Hooks and middleware written the way the upstream library documents them run unchanged.

An ``on_message`` hook that drops the input fails the request before anything is stored or
sent; tool middleware may call ``call_next()`` with no argument (the call it received,
possibly adjusted) or ``call_next(call)``; what a layer returns is what the layer outside
it receives, and the outermost value becomes the tool's result.
"""

from __future__ import annotations

import pytest

from tests.runtime.support import Observer, ProbeModel, answer, call, calls, lookup
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType as T
from zett_agent.events import AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import MessageAppendedEvent
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import SystemMessage, ToolMessage
from zett_agent.tools.base import current_tool_call_id, tool


class DropInput(AgentExtension):
    compacted = 0

    async def on_message(self, context):
        context.input_message = None

    async def on_compact(self, context):
        self.compacted += 1


async def test_an_on_message_that_drops_the_input_fails_before_anything_is_stored():
    memory, watch, drop = InMemoryMessageAccumulator(), Observer(), DropInput()

    class Restore(AgentExtension):
        async def on_state(self, context):
            context.add_message(SystemMessage("restored"))

    model = ProbeModel(answer("never"))
    agent = await Agent.create(model, extensions=[memory, Restore(), drop, watch])
    events = []
    with pytest.raises(AgentProtocolError, match="must produce a UserMessage"):
        async for event in agent.stream("hi", config=AgentRunConfig(session_id="s")):
            events.append(event)
    assert events == []
    assert model.requests == []
    assert drop.compacted == 0  # not mistaken for a compaction pass
    assert memory.messages("s") == ()
    assert watch.of_type(MessageAppendedEvent) == []
    assert len(watch.errors) == 1
    assert agent.get_state("s").phase is AgentPhase.FAILED


async def test_run_reports_the_dropped_input_not_a_missing_run_completed():
    agent = await Agent.create(ProbeModel(answer("never")), extensions=[DropInput()])
    with pytest.raises(AgentProtocolError, match="must produce a UserMessage"):
        await agent.run("hi")


@tool
def calculate(value: int) -> str:
    """Report a value.

    Args:
        value: The value to report.

    Guidelines:
        - Use in middleware tests.
    """
    return str(value)


class Layer(AgentExtension):
    """Adds one to the argument, calls the next layer without arguments, tags its result."""

    def __init__(self, label: str, order: list[str]) -> None:
        self.name = f"layer-{label}"
        self.label, self.order = label, order

    async def on_tool_call(self, context, call, call_next):
        self.order.append(f"{self.label} in {current_tool_call_id()}")
        call.arguments["value"] += 1
        result = await call_next()
        self.order.append(f"{self.label} out")
        return f"{result}:{self.label}"


async def test_tool_middleware_may_call_the_next_layer_without_arguments():
    order: list[str] = []
    model = ProbeModel(calls(call("calculate", "c1", value=1)), answer("done"))
    agent = await Agent.create(
        model, tools=[calculate], extensions=[Layer("outer", order), Layer("inner", order)]
    )
    events = [event async for event in agent.stream("go")]
    completed = next(e for e in events if e.type is T.TOOL_COMPLETED)
    # The handler saw both adjustments; each layer received the raw value of the one inside.
    assert completed.message.content == "3:inner:outer"
    assert order == ["outer in c1", "inner in c1", "inner out", "outer out"]
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage) and sent.content == "3:inner:outer"


async def test_call_next_with_the_call_and_with_another_call_still_work():
    seen: list[str] = []

    class Explicit(AgentExtension):
        async def on_tool_call(self, context, call, call_next):
            return await call_next(call)

    class Redirect(AgentExtension):
        async def on_tool_call(self, context, call, call_next):
            seen.append(call.arguments["key"])
            replaced = type(call)(call.id, call.name, {"key": "other"})
            return await call_next(replaced)

    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[Explicit(), Redirect()])
    await agent.run("hi")
    assert seen == ["k"]
    assert model.requests[1].messages[-1].content == "value of other"


async def test_a_middleware_error_becomes_the_tool_result_text():
    class Guard(AgentExtension):
        async def on_tool_call(self, context, call, call_next):
            if call.id == "blocked":
                raise PermissionError("blocked by middleware")
            return await call_next()

    model = ProbeModel(
        calls(call("lookup", "allowed", key="a"), call("lookup", "blocked", key="b")),
        answer("done"),
    )
    agent = await Agent.create(model, tools=[lookup], extensions=[Guard()])
    await agent.run("hi")
    results = {m.tool_call_id: m for m in model.requests[1].messages if isinstance(m, ToolMessage)}
    assert results["allowed"].success and results["allowed"].content == "value of a"
    assert not results["blocked"].success
    assert results["blocked"].content == "blocked by middleware"
