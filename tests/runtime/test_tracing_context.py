"""Trace context around ``TracingExtension``: parents, links, traceparents carried across
workers, wait spans, the global tracer provider, and no OpenTelemetry import when unused."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from opentelemetry.trace import StatusCode

from tests.runtime.support import (
    ProbeModel,
    SeededHistory,
    answer,
    call,
    calls,
    collect,
    lookup,
    raising_in,
)
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.ask_user import AskUserExtension
from zett_agent.extensions.tracing import (
    TRACE_LINKS,
    TRACE_PARENT,
    TracingExtension,
    current_traceparent,
    record_wait_span,
)
from zett_agent.messages import AssistantMessage, ToolCall, UserMessage
from zett_agent.tools.base import tool

ROOT = Path(__file__).resolve().parents[2]
SESSION = "chat-7"


def traceparent(span) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def finished(exporter, name: str):
    (span,) = [span for span in exporter.get_finished_spans() if span.name == name]
    return span


async def run_once(provider, *, metadata=None, tools=(), turns=None):
    tracing = TracingExtension("helper", tracer_provider=provider)
    model = ProbeModel(*(turns or [answer("hello")]))
    agent = await Agent.create(model, tools=list(tools), extensions=[tracing])
    config = AgentRunConfig(session_id=SESSION)
    await collect(agent, "hi", config=config, metadata=metadata)
    return tracing


async def test_the_consumers_current_span_is_the_runs_parent(exporter, provider):
    outer = provider.get_tracer("test")
    with outer.start_as_current_span("websocket receive") as socket_span:
        await run_once(provider)
    run = finished(exporter, "invoke_agent helper")
    assert run.parent.span_id == socket_span.get_span_context().span_id
    assert run.context.trace_id == socket_span.get_span_context().trace_id


async def test_a_traceparent_in_the_metadata_is_the_runs_parent(exporter, provider):
    remote = provider.get_tracer("test").start_span("http request on another worker")
    remote.end()
    with provider.get_tracer("test").start_as_current_span("unrelated"):
        await run_once(provider, metadata={TRACE_PARENT: traceparent(remote)})
    run = finished(exporter, "invoke_agent helper")
    assert run.parent.span_id == remote.get_span_context().span_id
    assert run.context.trace_id == remote.get_span_context().trace_id


async def test_a_continuation_links_the_run_it_continues(exporter, provider):
    await run_once(provider)
    first = finished(exporter, "invoke_agent helper")
    exporter.clear()
    await run_once(provider, metadata={TRACE_LINKS: [traceparent(first)]})
    second = finished(exporter, "invoke_agent helper")
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    assert second.context.trace_id != first.context.trace_id  # a trace of its own


async def test_a_malformed_traceparent_starts_a_new_trace(exporter, provider):
    await run_once(provider, metadata={TRACE_PARENT: "not a traceparent", TRACE_LINKS: ["x"]})
    run = finished(exporter, "invoke_agent helper")
    assert run.parent is None and run.links == ()


async def test_a_traceparent_that_is_not_a_string_is_refused(provider):
    with pytest.raises(TypeError, match="traceparent"):
        await run_once(provider, metadata={TRACE_PARENT: 42})


async def test_traceparents_of_the_running_request_and_its_tool_call(exporter, provider):
    seen: dict[str, str | None] = {}

    @tool
    async def look() -> str:
        """Look around.

        Guidelines:
            - Use to look.
        """
        seen["run"] = tracing.traceparent(SESSION)
        seen["tool"] = tracing.traceparent(SESSION, "call-1")
        seen["current"] = current_traceparent()
        seen["other session"] = tracing.traceparent("someone else")
        seen["unknown call"] = tracing.traceparent(SESSION, "call-9")
        return "ok"

    tracing = TracingExtension("helper", tracer_provider=provider)
    model = ProbeModel(calls(call("look")), answer("done"))
    agent = await Agent.create(model, tools=[look], extensions=[tracing])
    await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    run = finished(exporter, "invoke_agent helper")
    tool_span = finished(exporter, "execute_tool look")
    assert seen == {
        "run": traceparent(run),
        "tool": traceparent(tool_span),
        "current": traceparent(tool_span),
        "other session": None,
        "unknown call": None,
    }
    assert tracing.traceparent(SESSION) is None  # the run has ended
    assert current_traceparent() is None  # the run's context never leaks to its consumer


async def test_a_wait_span_is_recorded_after_the_fact_under_its_run(exporter, provider):
    await run_once(provider)
    run = finished(exporter, "invoke_agent helper")
    asked = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    record_wait_span(
        kind="approval",
        outcome="denied",
        requested_at=asked,
        ended_at=asked + timedelta(hours=3),
        conversation_id=SESSION,
        tool_name="save_note",
        tool_call_id="call-1",
        answered_by="user:17",
        expires_at=asked + timedelta(days=1),
        parent=traceparent(run),
        tracer_provider=provider,
    )
    wait = finished(exporter, "wait approval")
    assert wait.parent.span_id == run.context.span_id
    assert wait.end_time - wait.start_time == 3 * 3600 * 10**9
    assert wait.start_time == int(asked.timestamp()) * 10**9
    assert dict(wait.attributes) == {
        "zett.wait.kind": "approval",
        "zett.wait.outcome": "denied",
        "gen_ai.conversation.id": SESSION,
        "gen_ai.tool.name": "save_note",
        "gen_ai.tool.call.id": "call-1",
        "zett.wait.answered_by": "user:17",
        "zett.wait.expires_at": "2026-12-02T09:00:00+00:00",
    }
    assert wait.status.status_code is StatusCode.UNSET


def test_a_wait_span_needs_a_known_outcome_and_aware_times(provider):
    now = datetime.now(UTC)
    with pytest.raises(ValueError, match="outcome"):
        record_wait_span(kind="question", outcome="maybe", requested_at=now)
    with pytest.raises(ValueError, match="requested_at"):
        record_wait_span(kind="question", outcome="answered", requested_at=datetime.now())
    with pytest.raises(ValueError, match="kind"):
        record_wait_span(kind=" ", outcome="answered", requested_at=now)


def run_python(code: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_opentelemetry_is_imported_only_when_tracing_is_built():
    output = run_python(
        """
        import asyncio, sys
        import zett_agent, zett_agent.agent, zett_agent.extensions.tracing
        from zett_agent.agent import Agent
        from zett_agent.testing import ScriptedModel
        from zett_agent.messages import AssistantMessage

        async def main():
            agent = await Agent.create(ScriptedModel([AssistantMessage("hi")]))
            await agent.run("hello")
        asyncio.run(main())
        print("before", any(name.startswith("opentelemetry") for name in sys.modules))
        zett_agent.extensions.tracing.TracingExtension("helper")
        print("after", "opentelemetry.trace" in sys.modules)
        """
    )
    assert output.splitlines() == ["before False", "after True"]


#: A run's spans, recorded in a child process whose global provider is set as ``setup`` says.
RECORD_A_RUN = """
import asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from zett_agent.agent import Agent
from zett_agent.extensions.tracing import TracingExtension
from zett_agent.testing import ScriptedModel
from zett_agent.messages import AssistantMessage

exporter = InMemorySpanExporter()
{setup}

async def main():
    model = ScriptedModel([AssistantMessage("hi")])
    agent = await Agent.create(model, extensions=[tracing])
    await agent.run("hello")
asyncio.run(main())
print(sorted(span.name for span in exporter.get_finished_spans()))
"""


def test_spans_go_to_the_global_tracer_provider():
    setup = """
tracing = TracingExtension("helper")  # built before the SDK is configured
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
"""
    assert run_python(RECORD_A_RUN.format(setup=setup)) == "['chat', 'invoke_agent helper']"


def test_spans_go_to_a_global_provider_set_before_the_extension_is_built():
    setup = """
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
tracing = TracingExtension("helper")
"""
    assert run_python(RECORD_A_RUN.format(setup=setup)) == "['chat', 'invoke_agent helper']"


def test_spans_go_to_the_provider_otel_python_tracer_provider_names():
    # The API builds that provider when it is first asked for the global one.
    setup = """
tracing = TracingExtension("helper")
trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))
"""
    env = {**os.environ, "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}
    output = run_python(RECORD_A_RUN.format(setup=setup), env=env)
    assert output == "['chat', 'invoke_agent helper']"


async def test_a_resumed_run_is_marked_and_its_open_call_is_traced(exporter, provider):
    open_call = ToolCall(id="call-0", name="lookup", arguments={"key": "k"})
    history = SeededHistory(UserMessage("help me"), AssistantMessage(tool_calls=[open_call]))
    tracing = TracingExtension("helper", tracer_provider=provider)
    agent = await Agent.create(
        ProbeModel(answer("done")), tools=[lookup], extensions=[history, tracing]
    )
    earlier = provider.get_tracer("test").start_span("invoke_agent helper (worker A)")
    earlier.end()
    await agent.resume(
        config=AgentRunConfig(session_id=SESSION), metadata={TRACE_LINKS: traceparent(earlier)}
    )
    run = finished(exporter, "invoke_agent helper")
    assert run.attributes["zett.run.resumed"] is True
    assert [link.context.span_id for link in run.links] == [earlier.get_span_context().span_id]
    tool_span = finished(exporter, "execute_tool lookup")
    assert tool_span.parent.span_id == run.context.span_id
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call-0"


async def test_a_failing_setup_hook_fails_the_run_span(exporter, provider):
    tracing = TracingExtension("helper", tracer_provider=provider)
    broken = raising_in("on_state", LookupError("no such chat"))
    agent = await Agent.create(ProbeModel(answer("never")), extensions=[broken, tracing])
    with pytest.raises(LookupError):
        await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    run = finished(exporter, "invoke_agent helper")
    assert run.attributes["error.type"] == "LookupError"
    assert run.status.status_code is StatusCode.ERROR
    assert [span.name for span in exporter.get_finished_spans()] == ["invoke_agent helper"]


async def test_an_unanswered_question_is_expired_not_failed(exporter, provider):
    tracing = TracingExtension("helper", tracer_provider=provider)
    question = call("ask_user", "ask-1", question="Which colour?")
    model = ProbeModel(calls(question), answer("nobody answered"))
    # A microsecond deadline: the wait expires on the loop's next timer tick.
    asking = AskUserExtension(timeout=0.000001)
    agent = await Agent.create(model, extensions=[asking, tracing])
    await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    tool_span = finished(exporter, "execute_tool ask_user")
    assert tool_span.attributes["zett.outcome"] == "expired"
    assert "error.type" not in tool_span.attributes
    assert tool_span.status.status_code is StatusCode.UNSET
