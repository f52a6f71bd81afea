"""``ScriptModel`` alone: what it streams for each kind of turn, its usage, its errors."""

from __future__ import annotations

import pytest

from agent_app.testing import ScriptExhausted, ScriptModel, call, text
from zett_agent.messages import UserMessage
from zett_agent.model import ModelEventType, ModelRequest

REQUEST = ModelRequest(messages=(UserMessage("What is in stock today?"),))


async def play(model: ScriptModel, request: ModelRequest = REQUEST):
    return [event async for event in model.stream(request)]


async def test_text_streams_in_several_deltas_and_reports_usage():
    events = await play(ScriptModel([text("We have three red boots.")]))
    deltas = [e.delta for e in events if e.type is ModelEventType.TEXT]
    assert len(deltas) == 5 and "".join(deltas) == "We have three red boots."
    (done,) = [e for e in events if e.type is ModelEventType.COMPLETED]
    assert events[-1] is done and done.response.finish_reason == "stop"
    assert done.response.usage.input_tokens > 0 and done.response.usage.output_tokens > 0


async def test_a_list_of_calls_is_one_turn_of_parallel_calls():
    events = await play(ScriptModel([[call("stock", item="boots"), call("whoami")]]))
    message = events[-1].response.message
    assert [(c.name, c.arguments) for c in message.tool_calls] == [
        ("stock", {"item": "boots"}),
        ("whoami", {}),
    ]
    assert len({c.id for c in message.tool_calls}) == 2
    assert events[-1].response.finish_reason == "tool_calls"


async def test_a_call_past_the_script_says_how_long_it_was_and_what_was_asked():
    model = ScriptModel([text("one")])
    await play(model)
    with pytest.raises(ScriptExhausted) as exhausted:
        await play(model)
    assert isinstance(exhausted.value, AssertionError)
    assert "called 2 times but its script has 1 turn(s)" in str(exhausted.value)
    assert "What is in stock today?" in str(exhausted.value)
    assert model.calls == 2


async def test_a_function_sees_the_messages_and_tools_each_call():
    seen = []

    def script(messages, tools):
        seen.append((messages, tools))
        return text(f"call {len(seen)}")

    model = ScriptModel(script)
    for number in (1, 2, 3):
        events = await play(model)
        assert events[-1].response.message.content == f"call {number}"
    assert seen[0][0] == list(REQUEST.messages) and seen[0][1] == []


async def test_a_turn_of_the_list_may_be_a_function():
    model = ScriptModel([call("whoami"), lambda messages, tools: text(str(len(messages)))])
    await play(model)
    assert (await play(model))[-1].response.message.content == "1"


@pytest.mark.parametrize("turn", ["a plain string", [], [text("x")], None, 42])
def test_a_bad_turn_is_refused_when_the_script_is_written(turn):
    with pytest.raises(TypeError, match=r"call\(\.\.\.\)"):
        ScriptModel([turn])


def test_call_and_text_check_their_arguments():
    with pytest.raises(ValueError, match="tool name"):
        call("")
    with pytest.raises(TypeError, match="string"):
        text(3)
    assert call("refund", order=7).arguments == {"order": 7}


async def test_a_function_returning_a_bad_turn_fails_with_what_it_returned():
    model = ScriptModel(lambda messages, tools: "oops")
    with pytest.raises(TypeError, match="'oops'"):
        await play(model)
