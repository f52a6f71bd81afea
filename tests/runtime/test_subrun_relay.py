"""A tool that runs another agent: its events relayed (``AgentRunContext.relay``), and a
tool that ends the request after its batch (``AgentRunContext.end_after_tools``)."""

from __future__ import annotations

from contextlib import aclosing

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType, RelayedEvent
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.serialization import event_to_dict
from zett_agent.testing import ScriptedModel
from zett_agent.tools.base import current_run_context, current_tool_call_id, tool

E = AgentEventType


def calling(name: str, call_id: str = "call-1", **arguments) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))


@tool
async def lookup(order: int) -> str:
    """Look an order up.

    Args:
        order: The order's number.

    Guidelines:
        - Use freely.
    """
    return f"order {order}: paid"


async def collect(agent: Agent, text: str, session: str = "s1") -> list[AgentEvent]:
    events = []
    config = AgentRunConfig(session_id=session)
    async with aclosing(agent.stream(text, config=config)) as stream:
        async for event in stream:
            events.append(event)
    return events


async def test_a_sub_runs_events_reach_the_parent_stream_marked_and_its_answer_is_the_result():
    child = await Agent.create(
        ScriptedModel([calling("lookup", "c-1", order=7), AssistantMessage("Order 7 is paid.")]),
        system_prompt="billing",
        tools=[lookup],
        extensions=[InMemoryMessageAccumulator()],
    )

    @tool
    async def ask_billing(request: str) -> str:
        """Ask billing.

        Args:
            request: What to ask.

        Guidelines:
            - For money.
        """
        context = current_run_context()
        parent_call = current_tool_call_id()
        answer = ""
        config = AgentRunConfig(session_id=context.session_id, request_id="sub-1")
        async with aclosing(child.stream(request, config=config)) as stream:
            async for event in stream:
                if event.type is E.RUN_COMPLETED:
                    answer = event.message.content
                    continue
                await context.relay(event, agent="billing", parent_tool_call_id=parent_call)
        return answer

    parent = await Agent.create(
        ScriptedModel(
            [calling("ask_billing", "p-1", request="is 7 paid?"), AssistantMessage("Yes.")]
        ),
        tools=[ask_billing],
        extensions=[InMemoryMessageAccumulator()],
    )
    events = await collect(parent, "is my order paid?")
    nested = [event for event in events if isinstance(event, RelayedEvent)]
    assert {event.agent for event in nested} == {"billing"}
    assert {event.parent_tool_call_id for event in nested} == {"p-1"}
    assert {event.session_id for event in nested} == {"s1"}
    kinds = [event.type for event in nested]
    assert E.TOOL_STARTED in kinds and E.TOOL_COMPLETED in kinds and E.TEXT_DELTA in kinds
    assert E.RUN_COMPLETED not in kinds
    # The sub-run's own events sit between the parent call's start and its end.
    order = [(event.type, getattr(event, "agent", None)) for event in events]
    start = order.index((E.TOOL_STARTED, None))
    end = order.index((E.TOOL_COMPLETED, None))
    assert all(start < i < end for i, event in enumerate(events) if event in nested)
    completed = events[end]
    assert completed.message.content == "Order 7 is paid."
    assert events[-1].message.content == "Yes."
    data = event_to_dict(next(event for event in nested if event.type is E.TEXT_DELTA))
    assert data["agent"] == "billing" and data["parent_tool_call_id"] == "p-1"
    assert "agent" not in event_to_dict(events[-1])


async def test_a_tool_can_end_the_request_after_its_batch_without_another_model_call():
    model = ScriptedModel([calling("transfer"), AssistantMessage("never")])

    @tool
    async def transfer() -> str:
        """Hand over.

        Guidelines:
            - When asked.
        """
        current_run_context().end_after_tools()
        return "transferred"

    agent = await Agent.create(model, tools=[transfer], extensions=[InMemoryMessageAccumulator()])
    events = await collect(agent, "hand me over")
    assert events[-1].type is E.RUN_COMPLETED
    assert events[-1].message.tool_calls[0].name == "transfer"
    assert model.remaining == 1  # the model was not asked again
    results = [event.message.content for event in events if event.type is E.TOOL_COMPLETED]
    assert results == ["transferred"]


async def test_relay_refuses_a_run_completed_and_an_unmarked_event():
    seen: list[str] = []

    @tool
    async def bad() -> str:
        """Relay wrongly.

        Guidelines:
            - Never.
        """
        context = current_run_context()
        for event, agent in (
            (AgentEvent(E.RUN_COMPLETED, "s1"), "x"),
            (AgentEvent(E.TEXT_DELTA, "s1", delta="hi"), ""),
        ):
            with pytest.raises(AgentProtocolError) as error:
                await context.relay(event, agent=agent, parent_tool_call_id="p")
            seen.append(str(error.value))
        return "ok"

    agent = await Agent.create(
        ScriptedModel([calling("bad"), AssistantMessage("done")]),
        tools=[bad],
        extensions=[InMemoryMessageAccumulator()],
    )
    await collect(agent, "go")
    assert len(seen) == 2 and "RUN_COMPLETED" in seen[0]


async def test_cancelling_the_consumer_while_a_sub_run_waits_cancels_both_requests():
    import asyncio

    parked = asyncio.Event()
    child_cancelled = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait.

        Guidelines:
            - Never returns.
        """
        parked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            child_cancelled.set()
            raise
        return "never"

    child = await Agent.create(
        ScriptedModel([calling("wait_forever", "c-1")]),
        tools=[wait_forever],
        extensions=[InMemoryMessageAccumulator()],
    )

    @tool
    async def ask_child(request: str) -> str:
        """Ask the child.

        Args:
            request: What to ask.

        Guidelines:
            - Always.
        """
        context = current_run_context()
        config = AgentRunConfig(session_id="s1", request_id="sub-1")
        async with aclosing(child.stream(request, config=config)) as stream:
            async for event in stream:
                if event.type is not E.RUN_COMPLETED:
                    await context.relay(event, agent="child", parent_tool_call_id="p-1")
        return "never"

    parent = await Agent.create(
        ScriptedModel([calling("ask_child", "p-1", request="wait")]),
        tools=[ask_child],
        extensions=[InMemoryMessageAccumulator()],
    )
    task = asyncio.ensure_future(collect(parent, "go"))
    await parked.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):  # only turns a hang into a failure
            await task
    assert child_cancelled.is_set()
    assert not parent.pending and not child.pending
    messages = parent.get_state("s1").messages
    assert messages[-1].tool_call_id == "p-1" and not messages[-1].success
