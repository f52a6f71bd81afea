"""A failing model or hook fails the request with the original exception (docs/runtime.md,
Events; docs/runtime.md, Hooks)."""

from __future__ import annotations

import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType, AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.model import ModelEvent

from .support import Observer, ProbeModel, answer, call, calls, lookup, raising_in

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


def failing_turn(error: Exception, *, after_deltas: int = 1):
    async def turn(request):
        for index in range(after_deltas):
            yield ModelEvent.text(f"part {index} ")
        raise error

    return turn


async def test_a_model_error_reaches_the_caller_as_the_same_object():
    boom = ConnectionError("provider went away")
    agent = await Agent.create(ProbeModel(failing_turn(boom)), extensions=[])
    with pytest.raises(ConnectionError, match="provider went away") as caught:
        await agent.run("hi", config=CONFIG)
    assert caught.value is boom


async def test_a_model_error_runs_on_error_on_every_extension_and_no_success_hooks():
    boom = ConnectionError("provider went away")
    first, second = Observer("first", 10), Observer("second", 20)
    agent = await Agent.create(ProbeModel(failing_turn(boom)), extensions=[second, first])
    with pytest.raises(ConnectionError):
        await agent.run("hi", config=CONFIG)
    assert first.errors == [boom]
    assert second.errors == [boom]
    assert first.ended == second.ended == []
    assert first.phases[-2:] == [AgentPhase.GENERATING, AgentPhase.FAILED]


async def test_events_before_a_model_error_are_delivered_and_no_run_completed_follows():
    boom = ConnectionError("provider went away")
    agent = await Agent.create(ProbeModel(failing_turn(boom, after_deltas=2)), extensions=[])
    seen = []
    with pytest.raises(ConnectionError):
        async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
            async for event in events:
                seen.append(event.type)
    assert seen == [T.MODEL_STARTED, T.CONTENT_STARTED, T.TEXT_DELTA, T.TEXT_DELTA]


async def test_a_model_that_fails_before_streaming_fails_the_request():
    boom = RuntimeError("refused to start")

    class BrokenModel:
        def stream(self, request):
            raise boom

    watch = Observer()
    agent = await Agent.create(BrokenModel(), extensions=[watch])
    with pytest.raises(RuntimeError) as caught:
        await agent.run("hi", config=CONFIG)
    assert caught.value is boom
    assert watch.errors == [boom]


async def test_a_stream_that_ends_without_a_response_is_a_protocol_error():
    watch = Observer()
    model = ProbeModel([ModelEvent.text("half an answer")])
    agent = await Agent.create(model, extensions=[watch])
    with pytest.raises(AgentProtocolError, match="Model stream ended without a response"):
        await agent.run("hi", config=CONFIG)
    assert len(watch.errors) == 1
    assert isinstance(watch.errors[0], AgentProtocolError)


async def test_an_event_after_the_response_is_a_protocol_error():
    model = ProbeModel([*answer("done"), ModelEvent.text("extra")])
    agent = await Agent.create(model, extensions=[])
    with pytest.raises(AgentProtocolError):
        await agent.run("hi", config=CONFIG)
    assert model.streams_closed == 1


async def test_a_second_response_is_a_protocol_error():
    model = ProbeModel([*answer("one"), *answer("two")])
    agent = await Agent.create(model, extensions=[])
    with pytest.raises(AgentProtocolError):
        await agent.run("hi", config=CONFIG)


async def test_a_model_error_leaves_the_model_stream_closed():
    boom = ConnectionError("gone")
    model = ProbeModel(failing_turn(boom))
    agent = await Agent.create(model, extensions=[])
    with pytest.raises(ConnectionError):
        await agent.run("hi", config=CONFIG)
    assert model.streams_closed == 1


@pytest.mark.parametrize(
    "hook", ["on_tool", "on_state", "on_message", "before_run", "before_turn", "after_run"]
)
async def test_a_raising_hook_fails_the_request_with_its_own_exception(hook):
    boom = LookupError(f"{hook} broke")
    watch = Observer()
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[raising_in(hook, boom), watch])
    with pytest.raises(LookupError, match=f"{hook} broke") as caught:
        await agent.run("hi", config=CONFIG)
    assert caught.value is boom
    assert watch.errors == [boom]
    assert "on_success" not in watch.ended


async def test_the_raising_extension_also_sees_on_error():
    boom = KeyError("mine")
    errors = []

    class Broken(AgentExtension):
        async def before_run(self, context):
            raise boom

        async def on_error(self, context, error):
            errors.append(error)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Broken()])
    with pytest.raises(KeyError):
        await agent.run("hi", config=CONFIG)
    assert errors == [boom]


async def test_a_raising_model_middleware_fails_the_request():
    boom = TimeoutError("middleware gave up")

    class Broken(AgentExtension):
        async def on_model_request(self, context, request, call_next):
            raise boom
            yield  # pragma: no cover - makes this an async generator

    watch = Observer()
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Broken(), watch])
    with pytest.raises(TimeoutError) as caught:
        await agent.run("hi", config=CONFIG)
    assert caught.value is boom
    assert watch.errors == [boom]


async def test_a_raising_on_success_fails_the_request_without_run_completed():
    boom = OSError("could not save")

    class Saver(AgentExtension):
        async def on_success(self, context, result):
            raise boom

    watch = Observer()
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Saver(), watch])
    seen = []
    with pytest.raises(OSError, match="could not save") as caught:
        async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
            async for event in events:
                seen.append(event.type)
    assert caught.value is boom
    assert T.RUN_COMPLETED not in seen
    assert watch.errors == [boom]
    assert watch.phases[-1] is AgentPhase.FAILED


async def test_errors_raised_while_handling_a_failure_become_notes_on_the_original():
    boom = ConnectionError("provider went away")

    class Clumsy(AgentExtension):
        async def on_error(self, context, error):
            raise ValueError("cleanup also failed")

    after_clumsy = Observer(priority=200)
    agent = await Agent.create(ProbeModel(failing_turn(boom)), extensions=[Clumsy(), after_clumsy])
    with pytest.raises(ConnectionError) as caught:
        await agent.run("hi", config=CONFIG)
    assert caught.value is boom
    notes = "\n".join(getattr(boom, "__notes__", []))
    assert "cleanup also failed" in notes
    assert after_clumsy.errors == [boom]


async def test_a_failed_session_accepts_a_new_request():
    boom = ConnectionError("once")
    model = ProbeModel(failing_turn(boom), answer("recovered"))
    agent = await Agent.create(model, extensions=[])
    with pytest.raises(ConnectionError):
        await agent.run("hi", config=CONFIG)
    assert agent.is_conflict("s") is False
    assert agent.get_state("s").phase is AgentPhase.FAILED
    result = await agent.run("again", config=CONFIG)
    assert result.content == "recovered"


async def test_a_failure_after_a_tool_ran_still_reaches_the_caller_unchanged():
    boom = ConnectionError("second call failed")
    model = ProbeModel(calls(call("lookup", key="k")), failing_turn(boom))
    watch = Observer()
    agent = await Agent.create(model, tools=[lookup], extensions=[watch])
    with pytest.raises(ConnectionError) as caught:
        await agent.run("hi", config=CONFIG)
    assert caught.value is boom
    assert watch.ended == ["after_turn"]


async def test_a_stream_item_that_is_not_a_model_event_is_a_protocol_error():
    model = ProbeModel(["not an event", *answer("ok")])
    agent = await Agent.create(model, extensions=[])
    with pytest.raises(AgentProtocolError):
        await agent.run("hi", config=CONFIG)
