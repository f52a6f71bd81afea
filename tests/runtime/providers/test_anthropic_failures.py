"""AnthropicModel when things go wrong: HTTP errors, retries, broken streams, cancellation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from zett_agent.model import ModelEvent, ModelEventType
from zett_agent.providers.anthropic import AnthropicModel
from zett_agent.providers.base import ProviderAuthError, ProviderError

from .anthropic_events import OVERLOADED, block_start, message_start, text_delta, text_stream
from .fake_server import FakeServer, Reply, sse
from .support import (
    Adapters,
    RecordedSleep,
    cancel_reader_at_first_event,
    collect,
    collect_into,
    deltas,
)

# --- errors and retries ------------------------------------------------------------------


async def test_a_rate_limit_before_any_output_is_retried_after_retry_after(
    server: FakeServer, anthropic_model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
    server.reply(Reply.error(429, limited, {"Retry-After": "0"}), Reply.stream(text_stream("Hi")))

    events = await collect(anthropic_model)

    assert events[-1].response.message.content == "Hi"
    assert (len(server.requests), sleeps.delays) == (2, [0.0])


async def test_an_overloaded_error_event_before_any_output_is_retried(
    server: FakeServer, anthropic_model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    server.reply(
        Reply.stream([message_start(), sse(OVERLOADED, event="error")]),
        Reply.stream(text_stream("Hi")),
    )

    events = await collect(anthropic_model)

    assert deltas(events, ModelEventType.TEXT) == ["Hi"]
    assert (len(server.requests), sleeps.delays) == (2, [0.5])


async def test_an_error_event_after_the_first_event_surfaces_without_a_retry(
    server: FakeServer, anthropic_model: AnthropicModel, sleeps: RecordedSleep
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
        await collect_into(seen, anthropic_model)

    assert caught.value.retryable
    assert seen == [ModelEvent.text("Hel")]
    assert (len(server.requests), sleeps.delays) == (1, [])


async def test_a_server_error_status_is_retried_and_then_surfaces(
    server: FakeServer, anthropic_model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    failure = {"type": "error", "error": {"type": "api_error", "message": "Internal error"}}
    server.reply(*(Reply.error(500, failure) for _ in range(3)))

    with pytest.raises(ProviderError, match=r"HTTP 500.*Internal error") as caught:
        await collect(anthropic_model)

    assert caught.value.status_code == 500
    assert (len(server.requests), sleeps.delays) == (3, [0.5, 1.0])


async def test_a_rejected_key_raises_an_auth_error_naming_the_variable(
    server: FakeServer, anthropic_model: AnthropicModel, sleeps: RecordedSleep
) -> None:
    invalid = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    server.reply(Reply.error(401, invalid))

    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY") as caught:
        await collect(anthropic_model)

    assert "invalid x-api-key" in str(caught.value)
    assert (len(server.requests), sleeps.delays) == (1, [])


async def test_a_missing_key_raises_an_auth_error_before_any_request(
    server: FakeServer, adapters: Adapters, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no saved profile in ~/.config/anthropic either

    with pytest.raises(ProviderAuthError, match="set ANTHROPIC_API_KEY"):
        await collect(adapters.anthropic(api_key=None))

    assert server.requests == []


# --- cancellation ------------------------------------------------------------------------


async def test_cancelling_the_reading_task_mid_stream_closes_the_connection(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(
        Reply.stream(
            [message_start(), block_start(0, {"type": "text", "text": ""}), text_delta(0, "Once")],
            hold=True,
        )
    )

    await cancel_reader_at_first_event(anthropic_model)

    await asyncio.wait_for(server.disconnected.wait(), timeout=5)
