"""Each attempt of a traced run has a span exported as it begins, so links resolve.

A run span is exported when it ends, and a worker killed mid-run never ends it. So each
attempt of a run records a short span ``attempt <n>`` (a child of its ``invoke_agent``
span) at its first event and asks the exporter to send it at once, even through a
batching processor; the run's row names that span, and a continuation links to it.
"""

from __future__ import annotations

import asyncio

import pytest
from django.test import override_settings
from opentelemetry import trace
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from agent_app.models import ChatRun
from agent_app.sessions.background import sweep
from agent_app.sessions.registry import live_sessions
from tests.app.llm_doubles import GatedModel, completed
from tests.app.telemetry_support import SignallingExporter, global_exporter, ids_of, span_ids
from zett_agent.model import ModelEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def batched():
    """Spans also go through a ``BatchSpanProcessor`` that would wait a minute: what it
    has exported before that is what was flushed on purpose."""
    with override_settings(ZETT_OTEL=True):
        everything = global_exporter()
        exporter = SignallingExporter()
        processor = BatchSpanProcessor(exporter, schedule_delay_millis=60_000)
        processors = trace.get_tracer_provider()._active_span_processor
        before = processors._span_processors
        processors.add_span_processor(processor)
        try:
            yield everything, exporter
        finally:
            processors._span_processors = before
            processor.shutdown()


async def test_a_handed_over_run_links_to_its_first_attempt_exported_before_it_stopped(
    batched, sockets, use_model
):
    spans, batched = batched
    parked = asyncio.Event()  # never set: the first attempt stops half-way
    use_model(
        GatedModel(
            [ModelEvent.text("The wh"), parked],
            [ModelEvent.text("The whole answer."), completed("The whole answer.")],
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Tell me"})
    frames = await socket.until_event("text_delta")
    request_id = next(f for f in frames if f["type"] == "run_started")["request_id"]
    # Exported while the attempt runs (its run span is not ended, the batch not due).
    (first,) = await batched.wait_for("attempt 1")
    assert batched.named("invoke_agent demo") == []
    stored = await ChatRun.objects.aget(request_id=request_id)
    assert ids_of(stored.trace_context) == span_ids(first)
    sessions = live_sessions()
    await sessions.session(socket.session_id).run.step_aside()
    assert await sweep(sessions) == 1
    await socket.expect("run_continued")
    await socket.run_to_completion()
    (second,) = await batched.wait_for("attempt 2")
    assert second.attributes["zett.run.attempt"] == 2
    assert second.attributes["zett.request.id"] == request_id
    (continued,) = [s for s in spans.named("invoke_agent demo") if s.links]
    (link,) = continued.links
    assert (link.context.trace_id, link.context.span_id) == span_ids(first)
    assert second.parent.span_id == continued.get_span_context().span_id
    stored = await ChatRun.objects.aget(request_id=request_id)
    assert ids_of(stored.trace_context) == span_ids(second)
