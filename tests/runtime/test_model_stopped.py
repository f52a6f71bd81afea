"""MODEL_STOPPED: a model that ends abnormally ends the run normally (docs/runtime.md, Hooks)."""

from __future__ import annotations

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.model import ModelEvent, ModelResponse, StopInfo, StopReason

from .support import Observer, ProbeModel, events_of, lookup, without_deltas

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
STOP = StopInfo(StopReason.MAX_TOKENS, detail="length")


def stopped(message: AssistantMessage) -> list[ModelEvent]:
    return [
        ModelEvent.text(message.content),
        ModelEvent.completed(ModelResponse(message, finish_reason="length", stop=STOP)),
    ]


async def test_a_stopped_answer_emits_model_stopped_instead_of_model_completed():
    message = AssistantMessage(content="The answer is cut")
    ends = Observer()
    events = await events_of(ProbeModel(stopped(message)), extensions=[ends])
    assert without_deltas(events) == [T.MODEL_STARTED, T.MODEL_STOPPED, T.RUN_COMPLETED]
    stop_event = next(e for e in events if e.type is T.MODEL_STOPPED)
    assert stop_event.stop == STOP
    assert stop_event.response.stop == STOP
    assert stop_event.message.content == "The answer is cut"
    assert events[-1].message.content == "The answer is cut"
    assert ends.ended == ["after_turn", "after_run", "on_success"]
    assert ends.errors == []


async def test_tool_calls_of_a_stopped_message_are_not_executed():
    ran: list[str] = []

    class Spy(AgentExtension):
        async def before_tool(self, context, call):
            ran.append(call.id)

    message = AssistantMessage(
        content="Let me look", tool_calls=(ToolCall(id="c1", name="lookup", arguments={}),)
    )
    model = ProbeModel(stopped(message))
    events = await events_of(model, tools=[lookup], extensions=[Spy()])
    assert ran == []
    assert T.TOOL_STARTED not in [e.type for e in events]
    assert len(model.requests) == 1
    assert events[-1].type is T.RUN_COMPLETED
    assert events[-1].message.tool_calls[0].id == "c1"


async def test_run_returns_the_stopped_message():
    agent = await Agent.create(
        ProbeModel(stopped(AssistantMessage(content="partial"))), extensions=[]
    )
    assert (await agent.run("hi", config=CONFIG)).content == "partial"
