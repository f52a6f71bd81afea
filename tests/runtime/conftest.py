"""Fixtures shared by the runtime tests.

Every test runs under ``no_leaked_tasks``: a test that leaves an asyncio task running (a
request that was never closed, a tool that was never cancelled, a waiter that never woke)
fails, because such a task outlives its request and would fire into the next one. The check
needs no sleeping: every test awaits the cleanup it starts (closing its streams, awaiting
its tasks), so anything still pending at teardown is a leak by definition.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.leaks import fail_on_leaked_tasks


@pytest.fixture(autouse=True)
async def no_leaked_tasks():
    """Fail the test if it leaves asyncio tasks behind (``tests/leaks.py``)."""
    before = set(asyncio.all_tasks())
    yield
    await fail_on_leaked_tasks(before)


@pytest.fixture
def offline_estimate(monkeypatch, tmp_path):
    """No cached tiktoken encoding, so compaction's default counter is ``estimate_tokens``."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


@pytest.fixture
def exporter():
    """Spans recorded in memory, for the tracing tests (the SDK is imported only here)."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter):
    """A tracer provider that hands every span to ``exporter`` as it ends."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider
