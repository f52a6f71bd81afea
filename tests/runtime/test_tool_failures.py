"""A failing tool is a result, not a failed request (docs/runtime.md, Hooks)."""

from __future__ import annotations

import json

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import ImageContent, ImageUrlSource, TextContent, ToolMessage
from zett_agent.tools.base import current_tool_call_id, tool

from .support import (
    Observer,
    ProbeModel,
    answer,
    call,
    calls,
    collect,
    counting_tool,
    events_of,
    lookup,
    raising_in,
)

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


@tool
async def explode(reason: str) -> str:
    """Fail on purpose.

    Guidelines:
        - Use only in tests.
    """
    raise RuntimeError(f"exploded: {reason}")


def tool_results(model: ProbeModel) -> list[ToolMessage]:
    return [m for m in model.requests[-1].messages if isinstance(m, ToolMessage)]


async def test_an_unknown_tool_fails_the_call_and_the_loop_continues():
    watch = Observer()
    model = ProbeModel(calls(call("teleport", "c1")), answer("sorry"))
    events = await events_of(model, tools=[lookup], extensions=[watch])
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert failed.message.success is False
    assert "teleport" in failed.message.content
    assert failed.error is not None
    assert events[-1].type is T.RUN_COMPLETED
    assert [(m.tool_call_id, m.success) for m in tool_results(model)] == [("c1", False)]
    assert watch.errors == []


async def test_invalid_arguments_fail_the_call_without_running_the_handler():
    ran: list[int] = []
    model = ProbeModel(calls(call("count", number="many")), answer("ok"))
    events = await events_of(model, tools=[counting_tool(ran)])
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert ran == []
    assert "number" in failed.message.content
    assert failed.message.success is False


async def test_unknown_argument_keys_fail_the_call():
    model = ProbeModel(calls(call("lookup", key="k", surprise=1)), answer("ok"))
    events = await events_of(model, tools=[lookup])
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert "surprise" in failed.message.content


async def test_a_raising_handler_fails_the_call_with_its_error_text():
    watch = Observer()
    model = ProbeModel(calls(call("explode", reason="on purpose")), answer("ok"))
    events = await events_of(model, tools=[explode], extensions=[watch])
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert isinstance(failed.error, RuntimeError)
    assert str(failed.error) == "exploded: on purpose"
    assert "exploded: on purpose" in failed.message.content
    assert failed.message.success is False
    assert watch.tool_errors == [failed.error]
    assert watch.errors == []
    assert events[-1].type is T.RUN_COMPLETED


async def test_a_raising_sync_handler_fails_the_call_too():
    @tool
    def divide(a: int, b: int) -> float:
        """Divide two numbers.

        Guidelines:
            - Use to divide.
        """
        return a / b

    model = ProbeModel(calls(call("divide", a=1, b=0)), answer("ok"))
    events = await events_of(model, tools=[divide])
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert isinstance(failed.error, ZeroDivisionError)
    assert failed.message.success is False


async def test_a_raising_tool_middleware_fails_the_call_not_the_request():
    watch = Observer()

    class Guard(AgentExtension):
        async def on_tool_call(self, context, call, call_next):
            raise PermissionError("lookup is not allowed here")

    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    events = await events_of(model, tools=[lookup], extensions=[Guard(), watch])
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert isinstance(failed.error, PermissionError)
    assert "lookup is not allowed here" in failed.message.content
    assert watch.errors == []
    assert events[-1].type is T.RUN_COMPLETED


async def test_one_failed_call_does_not_stop_the_next_call_in_the_batch():
    model = ProbeModel(
        calls(call("explode", "c1", reason="x"), call("lookup", "c2", key="k")), answer("ok")
    )
    events = await events_of(model, tools=[explode, lookup])
    outcomes = [
        (e.type, e.tool_calls[0].id) for e in events if e.type in {T.TOOL_FAILED, T.TOOL_COMPLETED}
    ]
    assert outcomes == [(T.TOOL_FAILED, "c1"), (T.TOOL_COMPLETED, "c2")]
    assert [(m.tool_call_id, m.success) for m in tool_results(model)] == [
        ("c1", False),
        ("c2", True),
    ]


async def test_after_tool_receives_the_original_handler_exception():
    watch = Observer()
    model = ProbeModel(calls(call("explode", reason="x")), answer("ok"))
    events = await events_of(model, tools=[explode], extensions=[watch])
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert watch.tool_errors[0] is failed.error


@pytest.mark.parametrize("hook", ["before_tool", "after_tool"])
async def test_a_raising_tool_hook_fails_the_request_and_drops_the_result(hook):
    boom = ValueError(f"{hook} broke")
    watch = Observer()
    model = ProbeModel(calls(call("lookup", key="k")), answer("never"))
    agent = await Agent.create(model, tools=[lookup], extensions=[raising_in(hook, boom), watch])
    with pytest.raises(ValueError, match=f"{hook} broke") as caught:
        await collect(agent, "hi", config=CONFIG)
    assert caught.value is boom
    assert watch.errors == [boom]
    assert all(m.content != "value of k" for m in watch.tool_messages)
    assert len(model.requests) == 1


async def test_a_string_result_is_used_as_is():
    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    await events_of(model, tools=[lookup])
    assert tool_results(model)[0].content == "value of k"


async def test_other_results_are_serialised_to_json():
    @tool
    async def stats() -> dict:
        """Return statistics.

        Guidelines:
            - Use for statistics.
        """
        return {"count": 2, "names": ["a", "b"], "ok": True}

    model = ProbeModel(calls(call("stats")), answer("ok"))
    await events_of(model, tools=[stats])
    assert json.loads(tool_results(model)[0].content) == {
        "count": 2,
        "names": ["a", "b"],
        "ok": True,
    }


async def test_content_parts_become_multimodal_tool_content():
    image = ImageContent(source=ImageUrlSource(url="https://example.com/chart.png"))

    @tool
    async def chart() -> list:
        """Draw a chart.

        Guidelines:
            - Use for charts.
        """
        return [TextContent(text="Here is the chart"), image]

    model = ProbeModel(calls(call("chart")), answer("ok"))
    await events_of(model, tools=[chart])
    assert tool_results(model)[0].content == [TextContent(text="Here is the chart"), image]


async def test_a_tool_knows_the_id_of_the_call_it_serves():
    seen: list[str | None] = []

    @tool
    async def whoami() -> str:
        """Report the call id.

        Guidelines:
            - Use in tests.
        """
        seen.append(current_tool_call_id())
        return "ok"

    @tool
    def whoami_sync() -> str:
        """Report the call id from a thread.

        Guidelines:
            - Use in tests.
        """
        seen.append(current_tool_call_id())
        return "ok"

    model = ProbeModel(calls(call("whoami", "call-a"), call("whoami_sync", "call-b")), answer("ok"))
    await events_of(model, tools=[whoami, whoami_sync])
    assert seen == ["call-a", "call-b"]
    assert current_tool_call_id() is None
