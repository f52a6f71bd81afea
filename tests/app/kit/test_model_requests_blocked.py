"""Inside tests a real provider request raises ``ModelRequestsBlocked`` before any network:
the plugin turns the switch on for the run; ``ZETT_ALLOW_MODEL_REQUESTS=1`` or
``allow_model_requests()`` let requests through. A socket-level guard records every name
lookup and connection the process attempts, so "no network" is seen, not assumed."""

from __future__ import annotations

import socket
import sys

import pytest

from agent_app.testing import (
    ChatClient,
    ModelRequestsBlocked,
    allow_model_requests,
    override_assistant,
)
from zett_agent.messages import UserMessage
from zett_agent.model import ModelRequest
from zett_agent.providers.anthropic import AnthropicModel
from zett_agent.providers.base import ProviderConnectionError, RetryPolicy
from zett_agent.providers.openai import OpenAIModel
from zett_agent.providers.switch import model_requests_blocked

REQUEST = ModelRequest(messages=(UserMessage("Hello"),))
NO_RETRY = RetryPolicy(max_retries=0)


LOCAL = ("127.0.0.1", "localhost", "::1")


@pytest.fixture
def network(monkeypatch):
    """Every name lookup and connection to a host off this machine attempted from now on,
    refused and recorded (the test's own database and Redis stay reachable)."""
    attempts: list[tuple[str, object]] = []

    def guard(kind, original, host_of):
        def attempt(*args, **kwargs):
            host = host_of(args)
            host = host.decode() if isinstance(host, bytes) else host
            if host in LOCAL or not isinstance(host, str):
                return original(*args, **kwargs)
            attempts.append((kind, host))
            raise OSError(f"the test's network guard refused {kind} to {host}")

        return attempt

    def address(args):
        return args[1][0] if isinstance(args[1], tuple) else None

    monkeypatch.setattr(
        socket, "getaddrinfo", guard("getaddrinfo", socket.getaddrinfo, lambda a: a[0])
    )
    monkeypatch.setattr(
        socket,
        "create_connection",
        guard("create_connection", socket.create_connection, lambda a: a[0][0]),
    )
    monkeypatch.setattr(socket.socket, "connect", guard("connect", socket.socket.connect, address))
    monkeypatch.setattr(
        socket.socket, "connect_ex", guard("connect", socket.socket.connect_ex, address)
    )
    return attempts


def models():
    return [
        OpenAIModel("gpt-4o-mini", api_key="sk-test", retry_policy=NO_RETRY),
        AnthropicModel("claude-test", api_key="sk-test", retry_policy=NO_RETRY),
    ]


async def drain(model) -> None:
    async for _ in model.stream(REQUEST):
        pass


def test_the_plugin_is_loaded_once_and_blocks_requests(request):
    manager = request.config.pluginmanager
    plugin = sys.modules["agent_app.testing.pytest_plugin"]
    assert manager.get_plugin("agent_app.testing.pytest_plugin") is plugin
    assert [p for p in manager.get_plugins() if p is plugin] == [plugin]
    assert model_requests_blocked()


@pytest.mark.parametrize("model", models(), ids=["openai", "anthropic"])
async def test_a_real_request_is_blocked_before_any_network(model, network, monkeypatch):
    monkeypatch.delenv("ZETT_ALLOW_MODEL_REQUESTS", raising=False)
    with pytest.raises(ModelRequestsBlocked, match="ZETT_ALLOW_MODEL_REQUESTS=1"):
        await drain(model)
    assert network == []
    assert model._client is None  # not even a client was built


@pytest.mark.parametrize("model", models(), ids=["openai", "anthropic"])
async def test_the_variable_lets_requests_through_to_the_network(model, network, monkeypatch):
    monkeypatch.setenv("ZETT_ALLOW_MODEL_REQUESTS", "1")
    with pytest.raises(ProviderConnectionError):
        await drain(model)
    assert network[0][1] in ("api.openai.com", "api.anthropic.com")  # the guard saw it
    await model.aclose()


async def test_allow_model_requests_lifts_the_block_for_a_block_of_code(network, monkeypatch):
    monkeypatch.delenv("ZETT_ALLOW_MODEL_REQUESTS", raising=False)
    (model, _) = models()
    with allow_model_requests(), pytest.raises(ProviderConnectionError):
        await drain(model)
    assert network and model_requests_blocked()
    await model.aclose()


@pytest.mark.django_db(transaction=True)
async def test_a_chat_with_a_real_model_fails_the_test_with_the_named_error(
    desk, network, monkeypatch
):
    monkeypatch.delenv("ZETT_ALLOW_MODEL_REQUESTS", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with override_assistant("kit-desk", model="openai:gpt-4o-mini"):
        async with ChatClient(assistant="kit-desk") as chat:
            with pytest.raises(ModelRequestsBlocked, match="OpenAI"):
                await chat.send("Hello")
    assert chat.status == "failed" and network == []
