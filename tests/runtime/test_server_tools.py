"""Provider-hosted tools: offered, reported, never executed locally (docs/runtime.md,
Compaction)."""

from __future__ import annotations

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import AssistantMessage, ToolMessage
from zett_agent.model import (
    ModelEvent,
    ModelResponse,
    ServerToolCall,
    ServerToolDefinition,
    ServerToolInputDelta,
    ServerToolResult,
)

from .support import ProbeModel, answer, collect

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
SEARCH = ServerToolDefinition(type="web_search", configuration={"max_uses": 2})
CALL = ServerToolCall(id="srv-1", name="web_search", input={"query": "zett"})


class OffersSearch(AgentExtension):
    async def on_tool(self, context):
        context.register_server_tool(SEARCH)


def searching_turn(*, fail: bool = False, extra=()):
    result = ServerToolResult(
        call_id="srv-1",
        name="web_search",
        output=None if fail else {"hits": ["zett.example"]},
        error="quota exceeded" if fail else None,
    )
    finish = ModelEvent.server_tool_failed if fail else ModelEvent.server_tool_completed
    return [
        ModelEvent.server_tool_started(CALL),
        ModelEvent.server_tool_input(ServerToolInputDelta(call_id="srv-1", delta='{"query":')),
        ModelEvent.server_tool_input(ServerToolInputDelta(call_id="srv-1", delta='"zett"}')),
        finish(result),
        *extra,
        ModelEvent.text("Found it."),
        ModelEvent.completed(ModelResponse(AssistantMessage(content="Found it."))),
    ]


async def test_registered_server_tools_are_sent_to_the_provider():
    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[OffersSearch()])
    await agent.run("hi", config=CONFIG)
    assert model.requests[0].server_tools == (SEARCH,)
    assert model.requests[0].tools == ()


async def test_a_completed_server_tool_is_reported_in_stream_order():
    model = ProbeModel(searching_turn())
    agent = await Agent.create(model, extensions=[OffersSearch()])
    events = await collect(agent, "search", config=CONFIG)
    server = [e for e in events if e.type.name.startswith("SERVER_TOOL")]
    assert [e.type for e in server] == [
        T.SERVER_TOOL_STARTED,
        T.SERVER_TOOL_INPUT_DELTA,
        T.SERVER_TOOL_INPUT_DELTA,
        T.SERVER_TOOL_COMPLETED,
    ]
    assert server[0].server_tool_call == CALL
    assert [e.server_tool_input_delta.delta for e in server[1:3]] == ['{"query":', '"zett"}']
    assert server[3].server_tool_result.output == {"hits": ["zett.example"]}
    kinds = [e.type for e in events]
    assert kinds.index(T.MODEL_STARTED) < kinds.index(T.SERVER_TOOL_STARTED)
    assert kinds.index(T.SERVER_TOOL_COMPLETED) < kinds.index(T.MODEL_COMPLETED)
    assert events[-1].type is T.RUN_COMPLETED


async def test_a_failed_server_tool_is_reported_and_the_run_goes_on():
    model = ProbeModel(searching_turn(fail=True))
    agent = await Agent.create(model, extensions=[OffersSearch()])
    events = await collect(agent, "search", config=CONFIG)
    failed = next(e for e in events if e.type is T.SERVER_TOOL_FAILED)
    assert failed.server_tool_result.error == "quota exceeded"
    assert events[-1].type is T.RUN_COMPLETED


async def test_server_tools_are_never_executed_locally_nor_given_tool_messages():
    model = ProbeModel(searching_turn(), answer("second"))
    agent = await Agent.create(model, extensions=[OffersSearch()])
    events = await collect(agent, "search", config=CONFIG)
    assert T.TOOL_STARTED not in [e.type for e in events]
    await agent.run("again", config=CONFIG)
    assert not [m for m in model.requests[-1].messages if isinstance(m, ToolMessage)]


@pytest.mark.parametrize(
    "turn",
    [
        [
            ModelEvent.server_tool_input(ServerToolInputDelta(call_id="srv-1", delta="{")),
            *answer("x"),
        ],
        [
            ModelEvent.server_tool_completed(ServerToolResult(call_id="srv-1", name="web_search")),
            *answer("x"),
        ],
        [
            ModelEvent.server_tool_started(CALL),
            ModelEvent.server_tool_completed(ServerToolResult(call_id="srv-9", name="web_search")),
            *answer("x"),
        ],
        [ModelEvent.server_tool_started(CALL), *answer("x")],
        [
            ModelEvent.server_tool_started(CALL),
            ModelEvent.server_tool_started(CALL),
            *answer("x"),
        ],
    ],
    ids=[
        "input-before-start",
        "result-before-start",
        "result-for-another-id",
        "response-while-open",
        "started-twice",
    ],
)
async def test_an_invalid_server_tool_sequence_is_a_protocol_error(turn):
    agent = await Agent.create(ProbeModel(turn), extensions=[OffersSearch()])
    with pytest.raises(AgentProtocolError):
        await agent.run("search", config=CONFIG)


def test_a_server_tool_definition_needs_a_type():
    with pytest.raises(ValueError):
        ServerToolDefinition(type="")


async def test_register_server_tool_rejects_other_objects():
    errors = []

    class Wrong(AgentExtension):
        async def on_tool(self, context):
            try:
                context.register_server_tool({"type": "web_search"})
            except TypeError as error:
                errors.append(error)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Wrong()])
    await agent.run("hi", config=CONFIG)
    assert len(errors) == 1


async def test_two_server_tools_with_one_name_are_rejected():
    errors: list[Exception] = []
    versioned = ServerToolDefinition(type="code_execution", configuration={"name": "run"})

    class Twice(AgentExtension):
        async def on_tool(self, context):
            context.register_server_tool(SEARCH)
            context.register_server_tool(versioned)
            for duplicate in (
                ServerToolDefinition(type="web_search"),
                ServerToolDefinition(type="other_runner", configuration={"name": "run"}),
            ):
                try:
                    context.register_server_tool(duplicate)
                except ValueError as error:
                    errors.append(error)

    model = ProbeModel(answer("ok"))
    agent = await Agent.create(model, extensions=[Twice()])
    await agent.run("hi", config=CONFIG)
    assert [str(error) for error in errors] == [
        "Server tool 'web_search' is already registered",
        "Server tool 'run' is already registered",
    ]
    assert model.requests[0].server_tools == (SEARCH, versioned)
