"""``TracingExtension``: span names, parentage and GenAI attributes, read back from the
OpenTelemetry SDK's in-memory exporter (a real SDK tracer provider; only the LLM is a double).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from tests.runtime.support import (
    ProbeModel,
    answer,
    call,
    calls,
    cancel_when,
    collect,
    parked_tool,
)
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.tracing import TracingExtension
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.model import ModelEvent, ModelResponse, ModelUsage
from zett_agent.tools.base import tool

SESSION = "chat-42"


class NamedModel(ProbeModel):
    """A scripted model that names itself as provider adapters do."""

    provider = "openai"
    model = "gpt-test"


def reply(text: str, *, usage: ModelUsage, finish: str = "stop") -> list[ModelEvent]:
    message = AssistantMessage(content=text, model="gpt-test-2026")
    response = ModelResponse(message, finish, usage, response_id="chatcmpl-2")
    return [ModelEvent.text(text), ModelEvent.completed(response)]


def tool_turn(tool_call: ToolCall, *, usage: ModelUsage) -> list[ModelEvent]:
    message = AssistantMessage(tool_calls=(tool_call,), model="gpt-test-2026")
    return [
        ModelEvent.completed(ModelResponse(message, "tool_calls", usage, response_id="chatcmpl-1"))
    ]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Guidelines:
        - Use for sums.
    """
    return a + b


@tool
async def explode(reason: str) -> str:
    """Fail on purpose.

    Guidelines:
        - Use to fail.
    """
    raise ValueError(f"secret {reason}")


async def traced_agent(model, provider, *, tools=(add,), extensions=(), **options):
    tracing = TracingExtension("helper", tracer_provider=provider, **options)
    agent = await Agent.create(model, tools=list(tools), extensions=[*extensions, tracing])
    return agent, tracing


def by_name(exporter) -> dict[str, list]:
    spans: dict[str, list] = {}
    for span in exporter.get_finished_spans():
        spans.setdefault(span.name, []).append(span)
    return spans


def one(exporter, name: str):
    (span,) = by_name(exporter)[name]
    return span


USAGE = ModelUsage(input_tokens=10, output_tokens=3)


async def run_with_tool(provider, **options):
    model = NamedModel(
        tool_turn(call("add", "call-7", a=2, b=3), usage=USAGE),
        reply("five", usage=ModelUsage(input_tokens=20, output_tokens=4, cache_read_tokens=8)),
    )
    agent, tracing = await traced_agent(model, provider, **options)
    await collect(agent, "what is 2+3?", config=AgentRunConfig(session_id=SESSION))
    return tracing


async def test_a_run_with_a_tool_has_one_span_per_run_model_call_and_tool(exporter, provider):
    await run_with_tool(provider)
    spans = by_name(exporter)
    assert sorted((name, len(found)) for name, found in spans.items()) == [
        ("chat gpt-test", 2),
        ("execute_tool add", 1),
        ("invoke_agent helper", 1),
    ]
    run = one(exporter, "invoke_agent helper")
    assert run.parent is None and run.kind is SpanKind.INTERNAL
    for span in [*spans["chat gpt-test"], *spans["execute_tool add"]]:
        assert span.parent.span_id == run.context.span_id
        assert span.context.trace_id == run.context.trace_id
    first, second = sorted(spans["chat gpt-test"], key=lambda span: span.start_time)
    tool_span = one(exporter, "execute_tool add")
    assert first.end_time <= tool_span.start_time <= tool_span.end_time <= second.start_time


async def test_run_span_attributes_aggregate_usage(exporter, provider):
    await run_with_tool(provider)
    run = one(exporter, "invoke_agent helper")
    attributes = dict(run.attributes)
    request_id = attributes.pop("zett.request.id")
    assert request_id
    assert attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "helper",
        "gen_ai.agent.id": "helper",
        "gen_ai.conversation.id": SESSION,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "server.address": "api.openai.com",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 8,
        "gen_ai.response.finish_reasons": ("stop",),
        "zett.outcome": "completed",
    }
    assert run.status.status_code is StatusCode.UNSET


async def test_chat_and_tool_span_attributes(exporter, provider):
    await run_with_tool(provider)
    first, second = sorted(by_name(exporter)["chat gpt-test"], key=lambda span: span.start_time)
    assert first.kind is SpanKind.CLIENT
    assert dict(first.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": SESSION,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "server.address": "api.openai.com",
        "gen_ai.response.model": "gpt-test-2026",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 3,
        "zett.outcome": "completed",
    }
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert second.attributes["gen_ai.response.id"] == "chatcmpl-2"
    assert second.attributes["gen_ai.usage.cache_read.input_tokens"] == 8
    tool_span = one(exporter, "execute_tool add")
    assert dict(tool_span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call-7",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
        "gen_ai.conversation.id": SESSION,
        "zett.outcome": "completed",
    }


async def test_content_is_not_recorded_by_default(exporter, provider):
    await run_with_tool(provider)
    recorded = json.dumps([dict(span.attributes) for span in exporter.get_finished_spans()])
    assert "2+3" not in recorded and "five" not in recorded
    for span in exporter.get_finished_spans():
        assert not {
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        } & set(span.attributes)


async def test_content_is_recorded_when_asked(exporter, provider):
    await run_with_tool(provider, record_content=True)
    run = one(exporter, "invoke_agent helper")
    assert json.loads(run.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is 2+3?"}]}
    ]
    assert json.loads(run.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "five"}]}
    ]
    first, second = sorted(by_name(exporter)["chat gpt-test"], key=lambda span: span.start_time)
    assert json.loads(first.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "You are a helpful assistant."}
    ]
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call-7", "name": "add", "arguments": {"a": 2, "b": 3}}
            ],
            "finish_reason": "tool_calls",
        }
    ]
    history = json.loads(second.attributes["gen_ai.input.messages"])
    assert [message["role"] for message in history] == ["user", "assistant", "tool"]
    assert history[2]["parts"] == [{"type": "tool_call_response", "id": "call-7", "response": "5"}]
    tool_span = one(exporter, "execute_tool add")
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert tool_span.attributes["gen_ai.tool.call.result"] == "5"


async def test_a_failing_model_fails_its_chat_span_and_the_run(exporter, provider):
    async def broken(request):
        yield ModelEvent.text("half")
        raise ConnectionError("provider said no to secret stuff")

    agent, _ = await traced_agent(NamedModel(broken), provider)
    with pytest.raises(ConnectionError):
        await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    run = one(exporter, "invoke_agent helper")
    chat = one(exporter, "chat gpt-test")
    for span in (run, chat):
        assert span.attributes["error.type"] == "ConnectionError"
        assert span.attributes["zett.outcome"] == "failed"
        assert span.status.status_code is StatusCode.ERROR
        assert "secret" not in (span.status.description or "")
    assert chat.parent.span_id == run.context.span_id


async def test_a_failing_model_with_content_records_the_error_text(exporter, provider):
    async def broken(request):
        raise ConnectionError("provider said no")
        yield  # pragma: no cover

    agent, _ = await traced_agent(NamedModel(broken), provider, record_content=True)
    with pytest.raises(ConnectionError):
        await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    run = one(exporter, "invoke_agent helper")
    assert run.status.description == "provider said no"
    assert [event.name for event in run.events] == ["exception"]


async def test_a_failing_tool_is_an_error_on_its_span_only(exporter, provider):
    model = NamedModel(calls(call("explode", reason="x")), answer("sorry"))
    agent, _ = await traced_agent(model, provider, tools=[explode])
    await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    tool_span = one(exporter, "execute_tool explode")
    assert tool_span.attributes["error.type"] == "ValueError"
    assert tool_span.attributes["zett.outcome"] == "failed"
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.status.description == "ValueError"
    run = one(exporter, "invoke_agent helper")
    assert run.status.status_code is StatusCode.UNSET
    assert run.attributes["zett.outcome"] == "completed"


class DeclinesEveryCall(AgentExtension):
    """What an approval extension does with a denied call: the middleware refuses to run
    it and ``after_tool`` records how the person answered."""

    async def on_tool_call(self, context, call, call_next):
        raise PermissionError("The person did not approve this call")

    async def after_tool(self, context, call, result, error):
        result.attributes["reply"] = {"kind": "approval", "approved": False}


async def test_a_declined_tool_call_is_not_an_error(exporter, provider):
    model = NamedModel(calls(call("add", a=1, b=1)), answer("ok, I will not"))
    agent, _ = await traced_agent(model, provider, extensions=[DeclinesEveryCall()])
    await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    tool_span = one(exporter, "execute_tool add")
    assert tool_span.attributes["zett.outcome"] == "denied"
    assert "error.type" not in tool_span.attributes
    assert tool_span.status.status_code is StatusCode.UNSET


async def test_a_cancelled_run_is_marked_cancelled_not_failed(exporter, provider):
    started = asyncio.Event()
    model = NamedModel(calls(call("slow")))
    agent, tracing = await traced_agent(model, provider, tools=[parked_tool(started)])
    await cancel_when(started, collect(agent, "hi", config=AgentRunConfig(session_id=SESSION)))
    run = one(exporter, "invoke_agent helper")
    tool_span = one(exporter, "execute_tool slow")
    chat = one(exporter, "chat gpt-test")
    assert tool_span.parent.span_id == run.context.span_id
    for span in (run, tool_span):
        assert span.attributes["zett.outcome"] == "cancelled"
        assert "error.type" not in span.attributes
        assert span.status.status_code is StatusCode.UNSET
    assert chat.attributes["zett.outcome"] == "completed"
    assert tracing.traceparent(SESSION) is None  # nothing of the run is left behind


async def test_a_run_closed_while_the_model_streams_is_cancelled(exporter, provider):
    reached, release = asyncio.Event(), asyncio.Event()

    async def parked(request):
        yield ModelEvent.text("thinking ")
        reached.set()
        await release.wait()

    agent, _ = await traced_agent(NamedModel(parked), provider)
    await cancel_when(reached, collect(agent, "hi", config=AgentRunConfig(session_id=SESSION)))
    chat = one(exporter, "chat gpt-test")
    assert chat.attributes["zett.outcome"] == "cancelled"
    assert chat.status.status_code is StatusCode.UNSET
    assert one(exporter, "invoke_agent helper").attributes["zett.outcome"] == "cancelled"


async def test_nothing_is_recorded_when_the_trace_is_not_sampled(exporter):
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen = []

    @tool
    async def peek() -> str:
        """Look at the trace.

        Guidelines:
            - Use to look.
        """
        seen.append(tracing.traceparent(SESSION))
        return "ok"

    agent, tracing = await traced_agent(
        NamedModel(calls(call("peek")), answer("done")), provider, tools=[peek]
    )
    await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    assert exporter.get_finished_spans() == ()
    assert seen == [None]


async def test_a_compaction_pass_is_not_a_run(exporter, provider):
    agent, _ = await traced_agent(NamedModel(), provider)
    await agent.compact(config=AgentRunConfig(session_id=SESSION))
    assert exporter.get_finished_spans() == ()


def test_agent_name_is_optional_and_checked(provider):
    assert TracingExtension(tracer_provider=provider).agent_name is None
    with pytest.raises(ValueError, match="agent_name"):
        TracingExtension("", tracer_provider=provider)


async def test_concurrent_sessions_of_one_agent_get_a_trace_each(exporter, provider):
    both_running = asyncio.Barrier(2)

    @tool
    async def meet() -> str:
        """Wait for the other session.

        Guidelines:
            - Use to meet.
        """
        await both_running.wait()  # neither tool returns before both have started
        return "met"

    def turns(request):
        if any(message.role.value == "tool" for message in request.messages):
            return answer("done")
        return calls(call("meet", f"call-{request.cache_key}"))

    class Model:
        provider, model = "openai", "gpt-test"

        async def stream(self, request):
            for event in turns(request):
                yield event

    agent, _ = await traced_agent(Model(), provider, tools=[meet])
    await asyncio.gather(
        *(collect(agent, "hi", config=AgentRunConfig(session_id=s)) for s in ("a", "b"))
    )
    found = by_name(exporter)
    runs = {
        span.attributes["gen_ai.conversation.id"]: span for span in found["invoke_agent helper"]
    }
    assert sorted(runs) == ["a", "b"]
    assert runs["a"].context.trace_id != runs["b"].context.trace_id
    for tool_span in found["execute_tool meet"]:
        session = tool_span.attributes["gen_ai.conversation.id"]
        assert tool_span.attributes["gen_ai.tool.call.id"] == f"call-{session}"
        assert tool_span.parent.span_id == runs[session].context.span_id
    for chat in found["chat gpt-test"]:
        session = chat.attributes["gen_ai.conversation.id"]
        assert chat.parent.span_id == runs[session].context.span_id


class LocalModel(NamedModel):
    """An OpenAI-compatible server of one's own (``base_url``)."""

    base_url = "http://127.0.0.1:11434/v1"


async def test_the_server_of_a_model_pointed_elsewhere_and_an_agent_id_are_recorded(
    exporter, provider
):
    model = LocalModel(reply("hi", usage=USAGE))
    agent, _ = await traced_agent(model, provider, agent_id="assistant-7")
    await collect(agent, "hello", config=AgentRunConfig(session_id=SESSION))
    run = one(exporter, "invoke_agent helper")
    chat = one(exporter, "chat gpt-test")
    for span in (run, chat):
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.attributes["server.port"] == 11434
    assert (run.attributes["gen_ai.agent.id"], run.attributes["gen_ai.agent.name"]) == (
        "assistant-7",
        "helper",
    )


async def test_a_tool_the_agent_does_not_have_is_named_other_unless_content_is_recorded(
    exporter, provider
):
    for record_content, expected in ((False, "other"), (True, "zz_made_up_7")):
        exporter.clear()
        model = NamedModel(calls(call("zz_made_up_7", "call-9", x=1)), answer("ok"))
        agent, _ = await traced_agent(model, provider, record_content=record_content)
        await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
        tool_span = one(exporter, f"execute_tool {expected}")
        assert tool_span.attributes["gen_ai.tool.name"] == expected
        if not record_content:
            recorded = [
                (span.name, value)
                for span in exporter.get_finished_spans()
                for value in [span.name, *map(str, span.attributes.values())]
                if "zz_made_up" in value
            ]
            assert recorded == []
    # A tool the agent has keeps its name either way.
    exporter.clear()
    await run_with_tool(provider)
    assert one(exporter, "execute_tool add").attributes["gen_ai.tool.name"] == "add"


async def test_a_model_that_states_another_name_or_server_is_described_anew(exporter, provider):
    model = LocalModel(reply("hi", usage=USAGE), reply("again", usage=USAGE))
    agent, _ = await traced_agent(model, provider)
    await collect(agent, "hello", config=AgentRunConfig(session_id=SESSION))
    model.model = "gpt-other"
    model.base_url = "http://10.0.0.7:8000/v1"
    await collect(agent, "hello", config=AgentRunConfig(session_id=SESSION))
    first, second = one(exporter, "chat gpt-test"), one(exporter, "chat gpt-other")
    assert first.attributes["server.address"] == "127.0.0.1"
    assert second.attributes["gen_ai.request.model"] == "gpt-other"
    assert (second.attributes["server.address"], second.attributes["server.port"]) == (
        "10.0.0.7",
        8000,
    )
