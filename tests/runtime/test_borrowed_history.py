"""The in-memory accumulator's history is borrowed by the request, never copied into it.

``InMemoryMessageAccumulator`` lends its validated list (``ValidatedHistory._lend``); the
context keeps it as a run at the right place until the first read of its messages builds
the tuple from it, and later reads extend that tuple. What must hold, as behaviour:

- the only per-request holder of a history message during a model call is the one tuple
  the model and the state share;
- every edit sequence gives the messages a plain copy (``restore_messages``) would give,
  while the history itself is edited, appended to and validated in between;
- a request that ends before reading its messages gives the history back intact.

Speed itself is measured by ``bench/runtime.py`` (variant d), never here.
"""

from __future__ import annotations

import random
import sys
from collections.abc import AsyncIterator

import pytest

from zett_agent.agent import Agent, AgentRunConfig, AgentRunContext
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
from zett_agent.history import ValidatedHistory, valid_history
from zett_agent.messages import AssistantMessage, SystemMessage, ToolCall, UserMessage
from zett_agent.model import ModelEvent, ModelRequest

from .support import answer, call, calls, lookup

CONFIG = AgentRunConfig(session_id="s")


def texts(messages) -> list[str]:
    """The contents of ``messages`` without the system prompt."""
    return [m.content for m in messages if not isinstance(m, SystemMessage)]


def chat(count: int) -> list:
    return [UserMessage(f"q{i}") if i % 2 == 0 else AssistantMessage(f"a{i}") for i in range(count)]


async def test_a_model_call_is_the_only_holder_of_the_history_besides_the_memory():
    memory = InMemoryMessageAccumulator()
    memory.load("s", chat(50))
    watched = memory.messages("s")[7]
    seen: list[tuple[int, bool]] = []
    agent: Agent

    class Model:
        def __init__(self) -> None:
            self.turns = [calls(call("lookup", key="k")), answer("done")]

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            state = agent.get_state("s")
            seen.append((sys.getrefcount(watched), request.messages is state.messages))
            for event in self.turns.pop(0):
                yield event

    agent = await Agent.create(
        Model(), tools=[lookup], extensions=[memory, ToolGuidelinesExtension()]
    )
    before = sys.getrefcount(watched)
    await agent.run("hi", config=CONFIG)
    # One more reference per model call: its tuple, shared with the state. No list copy.
    assert seen == [(before + 1, True), (before + 1, True)]
    assert memory._sessions["s"]._lent == 0


async def test_a_request_that_ends_before_reading_its_messages_gives_the_history_back():
    memory = InMemoryMessageAccumulator()
    memory.load("s", chat(6))

    class FailsOnce(AgentExtension):
        failed = False

        async def before_run(self, context):
            if not self.failed:
                self.failed = True
                raise KeyError("x")

    model = _Answers()
    agent = await Agent.create(model, extensions=[memory, FailsOnce()])
    with pytest.raises(KeyError):
        await agent.run("first", config=CONFIG)
    assert memory._sessions["s"]._lent == 0 and model.requests == 0
    earlier = [m.content for m in chat(6)]
    assert texts(agent.get_state("s").messages) == [*earlier, "first"]
    memory.truncate("s", 6)  # the failed input goes; the six that were lent stay as they were
    assert [m.content for m in memory.messages("s")] == earlier
    await agent.run("again", config=CONFIG)
    assert [m.content for m in memory.messages("s")] == [*earlier, "again", "ok"]


class _Answers:
    def __init__(self) -> None:
        self.requests = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests += 1
        for event in answer("ok"):
            yield event


async def test_a_history_truncated_during_the_request_keeps_what_the_request_restored():
    memory = InMemoryMessageAccumulator()
    memory.load("s", chat(4))

    class Truncates(AgentExtension):
        async def before_run(self, context):
            memory.truncate("s", 1)

    model = _Recording()
    agent = await Agent.create(model, extensions=[memory, Truncates()])
    await agent.run("hi", config=CONFIG)
    assert texts(model.sent[0]) == ["q0", "a1", "q2", "a3", "hi"]
    assert [m.content for m in memory.messages("s")] == ["q0", "ok"]


class _Recording:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.sent.append(request.messages)
        for event in answer("ok"):
            yield event


class _Gone:
    """Stands in for the request a context refers to weakly."""


def _context(gone: _Gone) -> AgentRunContext:
    return AgentRunContext(
        request=gone,  # type: ignore[arg-type]
        config=AgentRunConfig(session_id="s", request_id="r"),
        model=_Recording(),
        input_message=None,
        tools={},
        extensions=(),
        metadata={},
        tags=(),
    )


def _random_message(rng: random.Random, label: str):
    kind = rng.randrange(4)
    if kind == 0:
        return SystemMessage(label)
    if kind == 1:
        return UserMessage(label)
    if kind == 2:
        return AssistantMessage(label)
    return AssistantMessage(label, tool_calls=[ToolCall(f"c-{label}", "t")])  # left open


@pytest.mark.parametrize("seed", range(60))
def test_a_borrowed_history_reads_like_a_copied_one_whatever_happens(seed):
    rng = random.Random(seed)
    stored = [_random_message(rng, f"h{i}") for i in range(rng.randint(0, 8))]
    stored = valid_history(stored, keep_open_tail=True)
    history = ValidatedHistory(stored)
    expected_history = list(stored)
    keep = (_Gone(), _Gone())
    borrowed, copied = _context(keep[0]), _context(keep[1])
    for _ in range(rng.randint(0, 2)):
        head = SystemMessage("instructions")
        borrowed.add_message(head)
        copied.add_message(head)
    lease = history._lend(keep_open_tail=True)
    copied.restore_messages(list(lease.messages))
    borrowed.state._borrow(lease)
    for step in range(25):
        action = rng.randrange(9)
        message = _random_message(rng, f"m{step}")
        if action <= 2:
            length = len(copied.state.messages)
            index = rng.choice([None, 0, 1, 2, length, length + 2, -1])
            borrowed.add_message(message, index=index)
            copied.add_message(message, index=index)
        elif action == 3:
            assert borrowed.state.messages == copied.state.messages
        elif action == 4:
            assert borrowed.state._leading_system() == copied.state._leading_system()
        elif action == 5:  # the memory records, truncates or validates meanwhile
            history.append(message)
            expected_history.append(message)
        elif action == 6:
            length = rng.randint(0, len(expected_history))
            history.truncate(length)
            del expected_history[length:]
        elif action == 7:
            history.valid()
            expected_history = valid_history(expected_history)
        else:
            restored = [UserMessage(f"r{step}")]
            borrowed.restore_messages(restored)
            copied.restore_messages(restored)
        assert history.valid(keep_open_tail=True) == valid_history(
            expected_history, keep_open_tail=True
        )
        expected_history = valid_history(expected_history, keep_open_tail=True)
    if rng.random() < 0.5:
        borrowed.replace_messages(list(copied.state.messages)[1:], emit_new=False)
        copied.replace_messages(list(copied.state.messages)[1:], emit_new=False)
    borrowed.state._return_borrowed()
    assert borrowed.state.messages == copied.state.messages
    assert history._lent == 0
