"""``max_iterations`` bounds the model calls one input may cost (docs/runtime.md, Requests;
docs/runtime.md, Hooks)."""

from __future__ import annotations

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentPhase
from zett_agent.exceptions import AgentError, AgentIterationLimitError

from .support import Observer, ProbeModel, answer, call, calls, lookup

CONFIG = AgentRunConfig(session_id="s")


def tool_turns(count: int):
    return [calls(call("lookup", f"c{i}", key=str(i))) for i in range(count)]


async def test_a_model_that_never_stops_calling_tools_hits_the_limit():
    watch = Observer()
    model = ProbeModel(*tool_turns(10))
    agent = await Agent.create(model, tools=[lookup], extensions=[watch], max_iterations=3)
    with pytest.raises(AgentIterationLimitError, match="3") as caught:
        await agent.run("loop", config=CONFIG)
    assert len(model.requests) == 3
    assert isinstance(caught.value, AgentError)
    assert watch.errors == [caught.value]
    assert watch.phases[-1] is AgentPhase.FAILED


async def test_an_answer_on_the_last_allowed_call_succeeds():
    model = ProbeModel(*tool_turns(2), answer("just in time"))
    agent = await Agent.create(model, tools=[lookup], extensions=[], max_iterations=3)
    result = await agent.run("go", config=CONFIG)
    assert result.content == "just in time"
    assert len(model.requests) == 3


async def test_a_limit_of_one_allows_a_direct_answer_only():
    agent = await Agent.create(ProbeModel(answer("direct")), extensions=[], max_iterations=1)
    assert (await agent.run("go", config=CONFIG)).content == "direct"
    looping = await Agent.create(
        ProbeModel(*tool_turns(2)), tools=[lookup], extensions=[], max_iterations=1
    )
    with pytest.raises(AgentIterationLimitError):
        await looping.run("go", config=CONFIG)


async def test_the_budget_is_per_request_not_per_session():
    model = ProbeModel(*tool_turns(1), answer("one"), *tool_turns(1), answer("two"))
    agent = await Agent.create(model, tools=[lookup], extensions=[], max_iterations=2)
    assert (await agent.run("first", config=CONFIG)).content == "one"
    assert (await agent.run("second", config=CONFIG)).content == "two"


async def test_the_session_accepts_a_new_request_after_hitting_the_limit():
    model = ProbeModel(*tool_turns(2), answer("fresh"))
    agent = await Agent.create(model, tools=[lookup], extensions=[], max_iterations=2)
    with pytest.raises(AgentIterationLimitError):
        await agent.run("loop", config=CONFIG)
    assert (await agent.run("again", config=CONFIG)).content == "fresh"


@pytest.mark.parametrize("bad", [0, -1, True, False, 2.0, "3"])
def test_a_limit_that_is_not_an_int_of_at_least_one_is_rejected(bad):
    with pytest.raises(ValueError, match="max_iterations"):
        Agent(ProbeModel(), max_iterations=bad)
