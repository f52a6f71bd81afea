"""Fixtures for the provider tests: a local scripted server and a retry policy that never waits."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from zett_agent.providers.base import RetryPolicy

from .fake_server import FakeServer
from .support import RecordedSleep


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
def sleeps() -> RecordedSleep:
    return RecordedSleep()


@pytest.fixture
def retry_policy(sleeps: RecordedSleep) -> RetryPolicy:
    # No jitter, so the recorded delays are exact.
    return RetryPolicy(max_retries=2, initial_delay=0.5, jitter=0.0, sleep=sleeps)


@pytest.fixture(autouse=True)
def _no_ambient_provider_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own keys or base URLs must not leak into the tests."""
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "OPENAI_CUSTOM_HEADERS",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CUSTOM_HEADERS",
        "ZETT_OPENAI_BASE_URL",
        "ZETT_DEMO_PACE",
    ):
        monkeypatch.delenv(name, raising=False)
