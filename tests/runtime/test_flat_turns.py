"""A request's cost does not grow with the session: what makes it so, as behaviour.

``ValidatedHistory`` checks only what was appended since its last check and agrees with
``valid_history`` on the whole list; ``restore_messages`` puts history back without
publishing it; the memory and tool-guidance extensions never walk the restored history;
a finished request is freed by reference counting (no cycle keeps its messages alive).
Speed itself is measured by ``bench/runtime.py`` (variant d), never here.
"""

from __future__ import annotations

import gc
import random

import pytest

import zett_agent.history as history_module
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import MessageAppendedEvent
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
from zett_agent.history import ValidatedHistory, valid_history
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from .support import Observer, ProbeModel, Responder, answer, call, calls, close_at, lookup

CONFIG = AgentRunConfig(session_id="s")


def random_messages(rng: random.Random, count: int) -> list:
    """Messages of every kind in a random order: orphans, partial and duplicate results."""
    ids = ["c1", "c2", "c3"]
    made = []
    for _ in range(count):
        kind = rng.randrange(5)
        if kind == 0:
            made.append(UserMessage("u"))
        elif kind == 1:
            made.append(AssistantMessage("a"))
        elif kind == 2:
            chosen = rng.sample(ids, rng.randint(1, 3))
            made.append(AssistantMessage(tool_calls=[ToolCall(i, "t") for i in chosen]))
        else:
            made.append(ToolMessage(rng.choice(ids), "t", "r"))
    return made


@pytest.mark.parametrize("seed", range(40))
def test_validating_in_steps_agrees_with_validating_the_whole_list(seed):
    rng = random.Random(seed)
    stepwise = ValidatedHistory()
    whole: list = []
    for _ in range(12):
        added = random_messages(rng, rng.randint(0, 6))
        stepwise.extend(added)
        whole.extend(added)
        keep_open_tail = rng.random() < 0.3
        expected = valid_history(whole, keep_open_tail=keep_open_tail)
        assert stepwise.valid(keep_open_tail=keep_open_tail) == expected
        whole = list(expected)  # dropped messages are gone for good, as in the memory


def test_only_the_messages_added_since_the_last_check_are_validated(monkeypatch):
    checked: list[int] = []
    original = history_module.valid_history

    def counting(messages, **options):
        messages = list(messages)
        checked.append(len(messages))
        return original(messages, **options)

    monkeypatch.setattr(history_module, "valid_history", counting)
    stored = ValidatedHistory([UserMessage(f"q{i}") for i in range(1000)])
    stored.valid()
    stored.extend([UserMessage("next"), AssistantMessage("answer")])
    stored.valid()
    stored.valid()
    assert checked == [1000, 2]


def test_an_open_tail_kept_for_a_resume_is_checked_again_later():
    stored = ValidatedHistory([UserMessage("do it"), AssistantMessage(tool_calls=[call("x")])])
    assert len(stored.valid(keep_open_tail=True)) == 2
    assert stored.valid() == [stored.valid()[0]]
    assert len(stored) == 1


async def test_restore_messages_puts_history_after_the_system_messages_unpublished():
    restored = [UserMessage("earlier"), AssistantMessage("before")]
    watch = Observer()

    class Restores(AgentExtension):
        async def on_state(self, context):
            context.restore_messages(restored)

    model = ProbeModel(answer("now"))
    agent = await Agent.create(model, system_prompt="Be brief.", extensions=[Restores(), watch])
    await agent.run("hi", config=CONFIG)
    sent = model.requests[0].messages
    assert [type(m) for m in sent] == [SystemMessage, UserMessage, AssistantMessage, UserMessage]
    assert list(sent[1:3]) == restored
    published = [e.message for e in watch.of_type(MessageAppendedEvent)]
    assert restored[0] not in published and restored[1] not in published


async def test_restore_messages_needs_a_sequence():
    errors: list[Exception] = []

    class Restores(AgentExtension):
        async def on_state(self, context):
            try:
                context.restore_messages(m for m in [UserMessage("x")])
            except TypeError as error:
                errors.append(error)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Restores()])
    await agent.run("hi", config=CONFIG)
    assert len(errors) == 1


async def test_the_guidance_never_looks_inside_the_restored_history():
    # A system message inside the history is not searched for (that would scan the
    # session): the guidance goes after the leading ones. One that ends the context is
    # seen (the last message costs nothing to look at): the guidance follows it.
    memory = InMemoryMessageAccumulator()
    model = ProbeModel(answer("one"), answer("two"), answer("three"))
    agent = await Agent.create(
        model, tools=[lookup], extensions=[memory, ToolGuidelinesExtension()]
    )
    await agent.run("first", config=CONFIG)
    memory._sessions["s"].append(SystemMessage("stored rule", include_in_messages=True))
    await agent.run("second", config=CONFIG)
    prompt = agent.system_prompt
    sent = [m.content for m in model.requests[1].messages]
    assert sent[:4] == [prompt, "first", "one", "stored rule"]
    assert sent[4].startswith("# Tool snippets")
    assert sent[5:] == ["second"]
    await agent.run("third", config=CONFIG)
    sent = [m.content for m in model.requests[2].messages]
    assert sent[0] == prompt and sent[1].startswith("# Tool snippets")
    assert sent[2:] == ["first", "one", "stored rule", "second", "two", "third"]


async def succeed(agent: Agent) -> None:
    await agent.run("hi", config=CONFIG)


async def fail(agent: Agent) -> None:
    with pytest.raises(ConnectionError):
        await agent.run("fail", config=CONFIG)


async def close_early(agent: Agent) -> None:
    await close_at(agent, "hi", AgentEventType.TOOL_STARTED, config=CONFIG)


class Lookups:
    """Calls ``lookup`` then answers; a message saying ``fail`` makes the stream fail."""

    async def stream(self, request):
        if request.messages[-1].content == "fail":
            raise ConnectionError("the provider is down")
        events = answer("done") if isinstance(request.messages[-1], ToolMessage) else None
        for event in events or calls(call("lookup", key="k")):
            yield event


@pytest.mark.parametrize("ending", [succeed, fail, close_early], ids=lambda f: f.__name__)
async def test_a_finished_request_leaves_no_reference_cycle_behind(ending):
    agent = await Agent.create(Lookups(), tools=[lookup], extensions=[InMemoryMessageAccumulator()])
    await ending(agent)
    gc.collect()
    gc.disable()
    try:
        await ending(agent)
        assert gc.collect() == 0
    finally:
        gc.enable()


async def test_emitting_after_the_request_ended_is_a_protocol_error():
    kept: list = []

    class Keeps(AgentExtension):
        async def before_run(self, context):
            kept.append(context)

    agent = await Agent.create(Responder(), extensions=[Keeps()])
    await agent.run("hi", config=CONFIG)
    with pytest.raises(AgentProtocolError):
        await kept[0].emit(AgentEvent(AgentEventType.CUSTOM, "s", name="late"))
