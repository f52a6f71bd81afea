"""The internal-message budget as the upstream library documents it (docs/runtime.md, Steering).

A request answers at most ``max_internal_messages`` instructions its hooks publish; one
more fails the request with ``AgentIterationLimitError`` when it would be answered (after
the others were), and each instruction gets a fresh ``max_iterations`` budget. Replies
from outside beyond the budget are refused instead (see docs/runtime.md, Choices).
"""

from __future__ import annotations

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.exceptions import AgentIterationLimitError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import InternalMessageEvent
from zett_agent.messages import AgentMessage, AssistantMessage, ToolCall
from zett_agent.model import ModelEvent, ModelResponse

from .support import Responder, collect


class Publisher(AgentExtension):
    def __init__(self, count: int) -> None:
        self.count = count

    async def before_run(self, context):
        for index in range(self.count):
            await context.publish(InternalMessageEvent(AgentMessage(f"internal {index}")))


@pytest.mark.parametrize(("limit", "queued"), [(0, 0), (0, 1), (2, 2), (2, 3), (8, 8), (8, 9)])
@pytest.mark.parametrize("use_stream", [True, False])
async def test_the_budget_answers_up_to_the_limit_then_fails(limit, queued, use_stream):
    model = Responder()
    agent = await Agent.create(
        model, extensions=[Publisher(queued)], max_iterations=1, max_internal_messages=limit
    )
    assert agent.max_internal_messages == limit
    config = AgentRunConfig(session_id="s")
    for _ in range(2):  # the budget is per request: a second request has its own
        before = len(model.requests)
        work = collect(agent, "initial", config=config) if use_stream else agent.run("initial")
        if queued > limit:
            with pytest.raises(AgentIterationLimitError, match="internal messages"):
                await work
        else:
            await work
        assert len(model.requests) - before == 1 + min(limit, queued)


async def test_an_instruction_s_tool_loop_still_obeys_max_iterations():
    class AfterAnswer(AgentExtension):
        async def after_model(self, context, response):
            if response.message.content == "initial answer":
                await context.publish(InternalMessageEvent(AgentMessage("continue")))

    class ToolLoop:
        calls = 0

        async def stream(self, request):
            self.calls += 1
            message = (
                AssistantMessage("initial answer")
                if self.calls == 1
                else AssistantMessage(tool_calls=(ToolCall("call", "missing"),))
            )
            yield ModelEvent.completed(ModelResponse(message))

    model = ToolLoop()
    agent = await Agent.create(model, extensions=[AfterAnswer()], max_iterations=2)
    with pytest.raises(AgentIterationLimitError):
        await agent.run("initial")
    assert model.calls == 3


@pytest.mark.parametrize("limit", [-1, 1.5, True, "8", None])
def test_an_invalid_limit_is_refused(limit):
    with pytest.raises(ValueError, match="non-negative integer"):
        Agent(Responder(), max_internal_messages=limit)
