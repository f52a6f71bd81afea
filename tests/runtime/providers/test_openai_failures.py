"""OpenAIModel when things go wrong: HTTP errors, retries, broken streams, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from zett_agent.model import ModelEvent, ModelEventType
from zett_agent.providers.base import (
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    RetryPolicy,
)
from zett_agent.providers.openai import OpenAIModel

from .fake_server import FakeServer, Reply, sse, unused_port
from .openai_chunks import RATE_LIMITED, chunk, text_stream
from .support import (
    HELLO,
    Adapters,
    RecordedSleep,
    cancel_reader_at_first_event,
    collect,
    collect_into,
    deltas,
)

# --- errors and retries ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "expected_delay"),
    [
        (429, {"Retry-After": "0"}, 0.0),
        (429, {"Retry-After": "7"}, 7.0),
        (429, {"retry-after-ms": "250"}, 0.25),
        (503, {}, 0.5),
        (408, {}, 0.5),
        (409, {}, 0.5),
    ],
)
async def test_a_retryable_status_before_any_output_is_retried_after_the_right_delay(
    server: FakeServer,
    openai_model: OpenAIModel,
    sleeps: RecordedSleep,
    status: int,
    headers: dict[str, str],
    expected_delay: float,
) -> None:
    server.reply(Reply.error(status, RATE_LIMITED, headers), Reply.stream(text_stream("Hi")))

    events = await collect(openai_model)

    assert events[-1].response.message.content == "Hi"
    assert len(server.requests) == 2
    assert sleeps.delays == [expected_delay]


async def test_retries_back_off_exponentially_and_then_surface_the_error(
    server: FakeServer, openai_model: OpenAIModel, sleeps: RecordedSleep
) -> None:
    server.reply(*(Reply.error(500, {"error": {"message": "boom"}}) for _ in range(3)))

    with pytest.raises(ProviderError, match=r"HTTP 500.*boom") as caught:
        await collect(openai_model)

    assert caught.value.status_code == 500
    assert len(server.requests) == 3
    assert sleeps.delays == [0.5, 1.0]


async def test_a_retry_after_beyond_the_policy_limit_is_not_waited_for(
    server: FakeServer, openai_model: OpenAIModel, sleeps: RecordedSleep
) -> None:
    server.reply(Reply.error(429, RATE_LIMITED, {"Retry-After": "3600"}))

    with pytest.raises(ProviderError, match="HTTP 429") as caught:
        await collect(openai_model)

    assert caught.value.retry_after == 3600.0
    assert (len(server.requests), sleeps.delays) == (1, [])


async def test_a_bad_request_is_not_retried(
    server: FakeServer, openai_model: OpenAIModel, sleeps: RecordedSleep
) -> None:
    server.reply(Reply.error(400, {"error": {"message": "Unknown model gpt-test"}}))

    with pytest.raises(ProviderError, match="Unknown model gpt-test"):
        await collect(openai_model)

    assert (len(server.requests), sleeps.delays) == (1, [])


async def test_a_server_error_after_the_first_event_surfaces_without_a_retry(
    server: FakeServer, openai_model: OpenAIModel, sleeps: RecordedSleep
) -> None:
    server.reply(
        Reply.stream(
            [
                chunk({"content": "Hel"}),
                sse({"error": {"message": "upstream crashed", "type": "server_error"}}),
            ]
        ),
        Reply.stream(text_stream("Hello")),
    )
    seen: list[ModelEvent] = []

    with pytest.raises(ProviderError, match="upstream crashed") as caught:
        await collect_into(seen, openai_model)

    # The error would be retryable before any output; after output it never is.
    assert caught.value.retryable
    assert deltas(seen, ModelEventType.TEXT) == ["Hel"]
    assert (len(server.requests), sleeps.delays) == (1, [])


async def test_a_rejected_key_raises_an_auth_error_naming_the_variable(
    server: FakeServer, openai_model: OpenAIModel, sleeps: RecordedSleep
) -> None:
    server.reply(Reply.error(401, {"error": {"message": "Incorrect API key provided"}}))

    with pytest.raises(ProviderAuthError, match="OPENAI_API_KEY") as caught:
        await collect(openai_model)

    assert "Incorrect API key provided" in str(caught.value)
    assert caught.value.status_code == 401
    assert (len(server.requests), sleeps.delays) == (1, [])


async def test_a_missing_key_raises_an_auth_error_before_any_request(
    server: FakeServer, adapters: Adapters
) -> None:
    with pytest.raises(ProviderAuthError, match="set OPENAI_API_KEY"):
        await collect(adapters.openai(api_key=None))

    assert server.requests == []


async def test_the_key_defaults_to_the_sdk_environment_variable(
    server: FakeServer, adapters: Adapters, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.reply(Reply.stream(text_stream("ok")))

    await collect(adapters.openai(api_key=None))

    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


async def test_an_unreachable_server_raises_a_connection_error_with_the_url(
    adapters: Adapters,
) -> None:
    port = unused_port()

    with pytest.raises(ProviderConnectionError) as caught:
        await collect(adapters.openai(base_url=f"http://127.0.0.1:{port}/v1"))

    assert caught.value.url == f"http://127.0.0.1:{port}/v1/chat/completions"
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in str(caught.value)


async def test_a_closed_model_refuses_new_requests(openai_model: OpenAIModel) -> None:
    await openai_model.aclose()

    with pytest.raises(ProviderError, match="has been closed"):
        await collect(openai_model)


# --- cancellation ------------------------------------------------------------------------


async def test_cancelling_the_reading_task_mid_stream_closes_the_connection(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream([chunk({"content": "Once"})], hold=True))

    await cancel_reader_at_first_event(openai_model)

    await asyncio.wait_for(server.disconnected.wait(), timeout=5)


async def test_closing_the_stream_after_the_first_event_closes_the_connection(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream([chunk({"content": "Once"})], hold=True))

    stream = openai_model.stream(HELLO)
    first = await anext(stream)
    await stream.aclose()

    assert first == ModelEvent.text("Once")
    await asyncio.wait_for(server.disconnected.wait(), timeout=5)


async def test_cancelling_during_the_retry_backoff_stops_without_another_attempt(
    server: FakeServer, adapters: Adapters
) -> None:
    server.reply(Reply.error(429, RATE_LIMITED), Reply.stream(text_stream("too late")))
    backing_off = asyncio.Event()

    async def sleep_until_cancelled(seconds: float) -> None:
        backing_off.set()
        await asyncio.Event().wait()

    model = adapters.openai(retry_policy=RetryPolicy(sleep=sleep_until_cancelled))

    reader = asyncio.create_task(collect(model))
    await asyncio.wait_for(backing_off.wait(), timeout=5)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader

    assert len(server.requests) == 1
