"""``context.publish``: extension events reach ``on_event`` (docs/runtime.md, Requests)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import ExtensionEvent

from .support import ProbeModel, answer

CONFIG = AgentRunConfig(session_id="s")


@dataclass(frozen=True)
class Saved(ExtensionEvent):
    key: str


class Listener(AgentExtension):
    def __init__(self, name: str) -> None:
        self.name = name
        self.heard: list[str] = []

    async def on_event(self, context, event):
        if isinstance(event, Saved):
            self.heard.append(event.key)


class Publisher(AgentExtension):
    priority = 10

    def __init__(self, target=None) -> None:
        self.target = target

    async def before_run(self, context):
        await context.publish(Saved("k1"), target=self.target)


async def test_a_published_event_reaches_every_extension():
    first, second = Listener("first"), Listener("second")
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Publisher(), first, second])
    await agent.run("hi", config=CONFIG)
    assert first.heard == ["k1"]
    assert second.heard == ["k1"]


@pytest.mark.parametrize("by", ["instance", "name"])
async def test_a_targeted_event_reaches_only_its_target(by):
    first, second = Listener("first"), Listener("second")
    target = second if by == "instance" else "second"
    agent = await Agent.create(
        ProbeModel(answer("ok")), extensions=[Publisher(target), first, second]
    )
    await agent.run("hi", config=CONFIG)
    assert first.heard == []
    assert second.heard == ["k1"]


async def test_publishing_something_that_is_not_an_extension_event_is_an_error():
    errors = []

    class Wrong(AgentExtension):
        async def before_run(self, context):
            try:
                await context.publish("not an event")
            except TypeError as error:
                errors.append(error)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Wrong()])
    await agent.run("hi", config=CONFIG)
    assert len(errors) == 1
