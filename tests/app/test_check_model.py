"""``manage.py check_model`` against a local server speaking the OpenAI streaming format.

The command runs its own event loop (``asyncio.run``), so each test runs it in a worker
thread while the scripted server serves from the test's loop.
"""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.runtime.providers.fake_server import FakeServer, Reply, unused_port
from tests.runtime.providers.openai_chunks import DONE, chunk
from zett_agent.providers.switch import allow_model_requests

ROOT = Path(__file__).resolve().parents[2]


USAGE = chunk(
    choices=False,
    usage={
        "prompt_tokens": 21,
        "completion_tokens": 7,
        "total_tokens": 28,
        "prompt_tokens_details": {"cached_tokens": 4},
    },
)
HEARD = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Yes, I "}),
    chunk({"content": "hear you."}),
    chunk(finish="stop"),
    USAGE,
    DONE,
]


@pytest.fixture(autouse=True)
def _requests_to_the_local_server():
    """The command talks to the local scripted server: real requests are let through."""
    with allow_model_requests():
        yield


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer() as fake:
        yield fake


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch, server: FakeServer) -> None:
    monkeypatch.setenv("ZETT_OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


async def check_model(*args: str) -> str:
    """Run the command in a worker thread and return what it printed."""
    out = io.StringIO()
    await asyncio.to_thread(call_command, "check_model", *args, stdout=out)
    return out.getvalue()


@pytest.mark.usefixtures("openai_env")
async def test_it_prints_the_streamed_reply_usage_and_latency(server: FakeServer) -> None:
    server.reply(Reply.stream(HEARD))

    output = await check_model("--model", "openai:gpt-test", "--prompt", "Can you hear me?")

    assert "Model: openai:gpt-test" in output
    assert "Yes, I hear you." in output
    assert "Usage: 21 input tokens (4 cached), 7 output tokens (0 reasoning)" in output
    assert "Latency: first output after " in output
    assert "OK: gpt-test answered." in output
    sent = server.requests[0].json()
    assert sent["model"] == "gpt-test"
    assert sent["messages"][-1] == {"role": "user", "content": "Can you hear me?"}


@pytest.mark.usefixtures("openai_env")
async def test_it_checks_the_model_configured_in_the_settings(
    server: FakeServer, settings: Any
) -> None:
    settings.ZETT_MODEL = "openai:gpt-configured"
    server.reply(Reply.stream(HEARD))

    output = await check_model()

    assert "Model: openai:gpt-configured" in output
    assert server.requests[0].json()["model"] == "gpt-configured"


@pytest.mark.usefixtures("openai_env")
async def test_an_early_stop_is_reported_as_a_warning(server: FakeServer) -> None:
    server.reply(Reply.stream([chunk({"content": "Yes, I"}), chunk(finish="length")]))

    output = await check_model("--model", "openai:gpt-test")

    assert "Generation stopped early: max_tokens (length)" in output


@pytest.mark.usefixtures("openai_env")
async def test_a_missing_key_is_diagnosed_with_the_variable_to_set(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")

    with pytest.raises(CommandError, match=r"Authentication problem: .*set OPENAI_API_KEY"):
        await check_model("--model", "openai:gpt-test")

    assert server.requests == []


@pytest.mark.usefixtures("openai_env")
async def test_a_rejected_key_is_diagnosed_as_an_auth_error(server: FakeServer) -> None:
    server.reply(Reply.error(401, {"error": {"message": "Incorrect API key provided"}}))

    with pytest.raises(CommandError, match=r"Authentication problem: .*HTTP 401.*OPENAI_API_KEY"):
        await check_model("--model", "openai:gpt-test")


async def test_an_unreachable_server_is_diagnosed_with_the_url_it_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = unused_port()
    monkeypatch.setenv("ZETT_OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    with pytest.raises(CommandError, match="Cannot reach the model server") as caught:
        await check_model("--model", "openai:gpt-test")

    assert f"http://127.0.0.1:{port}/v1/chat/completions" in str(caught.value)


async def test_a_bad_spec_lists_the_accepted_forms() -> None:
    with pytest.raises(CommandError, match=r"'openai:<model>', 'openai-compatible:<model>'"):
        await check_model("--model", "gpt-4o")


async def test_the_offline_demo_model_passes_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZETT_DEMO_PACE", raising=False)

    output = await check_model("--model", "demo")

    assert "--- reply ---" in output
    assert "OK:" in output


def test_a_failed_check_exits_with_a_non_zero_status(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ZETT_MODEL": "openai:gpt-test"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check_model"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1
    assert "OPENAI_API_KEY" in result.stderr
