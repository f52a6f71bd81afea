"""Spans for the app's tracing tests: one in-memory exporter behind the global provider.

OpenTelemetry lets a process set its global tracer provider once, so the first test that
asks for ``spans`` installs a provider with this exporter, and every later one clears it.
``wait_for`` blocks on a condition the exporter signals (spans end in worker threads too:
a wait's span is recorded by whichever thread learnt its outcome), never on a timer.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

WAIT_SECONDS = 20


class SignallingExporter(InMemorySpanExporter):
    """An in-memory exporter that wakes whoever waits for a span by name."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def export(self, spans: Any) -> Any:
        result = super().export(spans)
        with self.changed:
            self.changed.notify_all()
        return result

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.get_finished_spans() if span.name == name]

    def _wait(self, name: str, count: int) -> list[ReadableSpan]:
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.named(name)) >= count, WAIT_SECONDS):
                names = [span.name for span in self.get_finished_spans()]
                raise AssertionError(f"expected {count} span(s) {name!r}, got {names}")
        return self.named(name)

    async def wait_for(self, name: str, count: int = 1) -> list[ReadableSpan]:
        """The finished spans named ``name`` once there are ``count`` of them."""
        return await asyncio.to_thread(self._wait, name, count)


_EXPORTER: SignallingExporter | None = None


def global_exporter() -> SignallingExporter:
    """The exporter behind the global tracer provider (installed on first use), emptied."""
    global _EXPORTER
    if _EXPORTER is None:
        _EXPORTER = SignallingExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    return _EXPORTER


def ids_of(traceparent: str) -> tuple[int, int]:
    """``(trace id, span id)`` of a W3C traceparent (its flags aside)."""
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


def span_ids(span: ReadableSpan) -> tuple[int, int]:
    context = span.get_span_context()
    return context.trace_id, context.span_id


# -- spans of a server process ------------------------------------------------------------


class JsonLinesExporter:
    """Writes each finished span as one JSON line to a file, flushed at once: a server
    process the test SIGKILLs leaves every span that had ended."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        with self.lock, open(self.path, "a", encoding="utf-8") as file:
            for span in spans:
                file.write(json.dumps(span_record(span)) + "\n")
                file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def span_record(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
        "links": [
            [f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}"] for link in span.links
        ],
        "attributes": dict(span.attributes or {}),
    }


def install_span_file(path: str) -> None:
    """Make the global tracer provider write every span to ``path`` (``live_daphne.py``'s
    ``ZETT_TEST_SPAN_FILE``)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(provider)


def read_span_file(path: Any) -> list[dict[str, Any]]:
    from pathlib import Path

    file = Path(path)
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
