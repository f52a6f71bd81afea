"""AnthropicModel when things go wrong: HTTP errors, retries, broken streams, cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from zett_agent.model import ModelEvent, ModelEventType
from zett_agent.providers.anthropic import AnthropicModel
from zett_agent.providers.base import ProviderAuthError, ProviderError, RetryPolicy

from .anthropic_events import MODEL, OVERLOADED, block_start, message_start, text_delta, text_stream
from .fake_server import FakeServer, Reply, sse
from .support import HELLO, RecordedSleep, collect, deltas


@pytest.fixture
async def model(server: FakeServer, retry_policy: RetryPolicy) -> AsyncIterator[AnthropicModel]:
    adapter = AnthropicModel(
        MODEL, api_key="sk-ant-test", base_url=server.url, retry_policy=retry_policy
    )
    yield adapter
    await adapter.aclose()


# --- errors and retries ------------------------------------------------------------------


async def test_a_rate_limit_before_any_output_is_retried_after_retry_after(
    server: FakeServer, model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
    server.reply(Reply.error(429, limited, {"Retry-After": "0"}), Reply.stream(text_stream("Hi")))

    events = await collect(model)

    assert events[-1].response.message.content == "Hi"
    assert (len(server.requests), sleeps.delays) == (2, [0.0])


async def test_an_overloaded_error_event_before_any_output_is_retried(
    server: FakeServer, model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    server.reply(
        Reply.stream([message_start(), sse(OVERLOADED, event="error")]),
        Reply.stream(text_stream("Hi")),
    )

    events = await collect(model)

    assert deltas(events, ModelEventType.TEXT) == ["Hi"]
    assert (len(server.requests), sleeps.delays) == (2, [0.5])


async def test_an_error_event_after_the_first_event_surfaces_without_a_retry(
    server: FakeServer, model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    server.reply(
        Reply.stream(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "Hel"),
                sse(OVERLOADED, event="error"),
            ]
        ),
        Reply.stream(text_stream("Hello")),
    )
    seen: list[ModelEvent] = []

    with pytest.raises(ProviderError, match="overloaded_error while streaming") as caught:
        async with contextlib.aclosing(model.stream(HELLO)) as stream:
            async for item in stream:
                seen.append(item)

    assert caught.value.retryable
    assert seen == [ModelEvent.text("Hel")]
    assert (len(server.requests), sleeps.delays) == (1, [])


async def test_a_server_error_status_is_retried_and_then_surfaces(
    server: FakeServer, model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    failure = {"type": "error", "error": {"type": "api_error", "message": "Internal error"}}
    server.reply(*(Reply.error(500, failure) for _ in range(3)))

    with pytest.raises(ProviderError, match=r"HTTP 500.*Internal error") as caught:
        await collect(model)

    assert caught.value.status_code == 500
    assert (len(server.requests), sleeps.delays) == (3, [0.5, 1.0])


async def test_a_rejected_key_raises_an_auth_error_naming_the_variable(
    server: FakeServer, model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    invalid = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    server.reply(Reply.error(401, invalid))

    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY") as caught:
        await collect(model)

    assert "invalid x-api-key" in str(caught.value)
    assert (len(server.requests), sleeps.delays) == (1, [])


async def test_a_missing_key_raises_an_auth_error_before_any_request(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no saved profile in ~/.config/anthropic either
    model = AnthropicModel(MODEL, base_url=server.url)

    with pytest.raises(ProviderAuthError, match="set ANTHROPIC_API_KEY"):
        await collect(model)

    assert server.requests == []


# --- cancellation ------------------------------------------------------------------------


async def test_cancelling_the_reading_task_mid_stream_closes_the_connection(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.reply(
        Reply.stream(
            [message_start(), block_start(0, {"type": "text", "text": ""}), text_delta(0, "Once")],
            hold=True,
        )
    )
    first_event = asyncio.Event()

    async def read() -> None:
        async with contextlib.aclosing(model.stream(HELLO)) as stream:
            async for _ in stream:
                first_event.set()

    reader = asyncio.create_task(read())
    await asyncio.wait_for(first_event.wait(), timeout=5)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader

    await asyncio.wait_for(server.disconnected.wait(), timeout=5)
