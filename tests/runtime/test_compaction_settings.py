"""``CompactionExtension`` (docs/runtime.md, Compaction): how tokens are counted, and which
settings it takes."""

from __future__ import annotations

import pytest

from zett_agent.agent import Agent
from zett_agent.events import AgentEventType
from zett_agent.extensions.compaction import CompactionExtension, estimate_tokens
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import (
    AnyMessage,
    AssistantMessage,
    ImageContent,
    ImageUrlSource,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.testing import ScriptedModel

from .conversation import CONFIG, SYSTEM_PROMPT, summary
from .support import collect

pytestmark = pytest.mark.usefixtures("offline_estimate")

T = AgentEventType


# -- counting tokens -----------------------------------------------------------------------


async def test_a_custom_token_counter_decides_when_and_what_to_compact():
    seen: list[tuple[AnyMessage, ...]] = []

    def ten_per_message(messages):
        seen.append(tuple(messages))
        return 10 * len(messages)

    u1, u2, u3 = UserMessage("one"), UserMessage("two"), UserMessage("three")
    primary = ScriptedModel([AssistantMessage("1"), AssistantMessage("2"), AssistantMessage("3")])
    summariser = ScriptedModel([summary("s")])
    compaction = CompactionExtension(
        summariser, max_tokens=45, keep_recent_tokens=10, count_tokens=ten_per_message
    )
    agent = await Agent.create(
        primary,
        system_prompt=SYSTEM_PROMPT,
        extensions=[InMemoryMessageAccumulator(), compaction],
    )

    await agent.run(u1, config=CONFIG)
    await agent.run(u2, config=CONFIG)  # 4 messages: 40 tokens, under the limit
    assert summariser.requests == []
    events = await collect(agent, u3, config=CONFIG)  # 6 messages: 60 tokens

    compacted = next(e.compaction for e in events if e.type is T.COMPACTION_COMPLETED)
    assert [m.content for m in compacted.replaced] == ["one", "1", "two", "2"]
    assert compacted.tokens_before == 60 and compacted.tokens_after == 30
    assert primary.requests[-1].messages[2] is u3
    assert all(isinstance(call, tuple | list) for call in seen)


async def test_a_counter_that_returns_no_count_fails_the_request_clearly():
    compaction = CompactionExtension(
        ScriptedModel([]), max_tokens=45, keep_recent_tokens=20, count_tokens=lambda m: "many"
    )
    agent = await Agent.create(ScriptedModel([]), extensions=[compaction])

    with pytest.raises(TypeError, match="count_tokens must return an int >= 0, got 'many'"):
        await agent.run("hi", config=CONFIG)


@pytest.mark.parametrize(
    "cache_dir",
    [pytest.param(None, id="no encoding is cached"), pytest.param("", id="caching is disabled")],
)
def test_the_default_counter_is_the_offline_estimate_when(monkeypatch, cache_dir):
    if cache_dir is not None:
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", cache_dir)
    assert CompactionExtension().count_tokens is estimate_tokens


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        pytest.param(UserMessage("abcdefgh"), 4 + 2, id="four characters a token"),
        pytest.param(UserMessage("abcdefghi"), 4 + 3, id="a started token counts"),
        pytest.param(UserMessage(""), 4, id="framing only"),
        pytest.param(
            UserMessage([TextContent("abcd"), ImageContent(ImageUrlSource("https://x/y.png"))]),
            4 + 1 + 1_000,
            id="images cost a flat amount",
        ),
        pytest.param(
            AssistantMessage(tool_calls=(ToolCall("c", "lookup", {"key": "k"}),)),
            4 + 5,  # 'lookup' + '{"key": "k"}' is 18 characters
            id="tool calls count name and arguments",
        ),
        pytest.param(ToolMessage("c", "lookup", "value of k"), 4 + 4, id="results count the name"),
        pytest.param(AssistantMessage("abcd", reasoning="efgh"), 4 + 2, id="reasoning counts"),
    ],
)
def test_the_offline_estimate(message, tokens):
    assert estimate_tokens([message]) == tokens


def test_the_offline_estimate_adds_up_messages():
    assert estimate_tokens([UserMessage("abcd"), AssistantMessage("abcd")]) == 10
    assert estimate_tokens([]) == 0


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_tokens": 0}, ValueError, "max_tokens must be positive, got 0"),
        ({"keep_recent_tokens": -1}, ValueError, "keep_recent_tokens must be positive, got -1"),
        ({"max_tokens": "big"}, TypeError, "max_tokens must be an int, got str"),
        ({"max_tokens": True}, TypeError, "max_tokens must be an int, got bool"),
        ({"count_tokens": 5}, TypeError, "count_tokens must be callable or None"),
        ({"model": object()}, TypeError, r"model must have a stream\(request\) method"),
    ],
)
def test_invalid_settings_are_rejected_with_the_rule_and_the_value(kwargs, error, match):
    with pytest.raises(error, match=match):
        CompactionExtension(**kwargs)


def test_defaults_follow_the_spec():
    extension = CompactionExtension()
    assert (extension.model, extension.max_tokens, extension.keep_recent_tokens) == (
        None,
        128_000,
        32_000,
    )
