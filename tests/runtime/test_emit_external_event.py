"""``Agent.emit_external_event``: broadcast in priority order, routing by config
(docs/runtime.md, Requests)."""

from __future__ import annotations

import asyncio

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.external import ExternalEvent

from .confirmation import (
    ACCEPTED,
    Session,
    confirmation_agent,
    reply,
)
from .support import ProbeModel

T = AgentEventType


class Claims(AgentExtension):
    """Accepts every event and records the config it was routed with."""

    def __init__(self, name: str, priority: int, log: list, verdict: bool = True) -> None:
        self.name, self.priority, self.log, self.verdict = name, priority, log, verdict

    def accept(self, config, event):
        self.log.append((self.name, config))
        return self.verdict


async def test_every_extension_is_asked_in_priority_order_even_after_one_accepted():
    log: list = []
    agent = await Agent.create(
        ProbeModel(),
        config=AgentRunConfig(session_id="s"),
        extensions=[
            Claims("third", 30, log),
            Claims("first", 10, log),
            Claims("second", 20, log, False),
        ],
    )
    accepted = agent.emit_external_event(ExternalEvent("ping", {}), config=AgentRunConfig("s"))
    assert accepted == ["first", "third"]
    assert [name for name, _ in log] == ["first", "second", "third"]


async def test_no_config_routes_to_the_initialized_config_when_nothing_runs():
    log: list = []
    agent = await Agent.create(
        ProbeModel(), config=AgentRunConfig(session_id="initial"), extensions=[Claims("c", 1, log)]
    )
    agent.emit_external_event(ExternalEvent("ping", {}))
    ((_, config),) = log
    assert config.session_id == "initial"


async def test_no_config_routes_to_the_single_active_request():
    log: list = []
    config = AgentRunConfig(session_id="active", request_id="req-1")
    agent = await confirmation_agent(AgentRunConfig(session_id="initial"), Claims("c", 200, log))
    session = await Session.parked(agent, config)
    assert agent.emit_external_event(reply()) == [*ACCEPTED, "c"]
    ((_, routed),) = log
    assert (routed.session_id, routed.request_id) == ("active", "req-1")
    await session.task


async def test_no_config_with_several_active_sessions_is_an_error():
    agent = await confirmation_agent()
    session_a = await Session.parked(agent, AgentRunConfig(session_id="a"))
    session_b = await Session.parked(agent, AgentRunConfig(session_id="b"))
    with pytest.raises(AgentProtocolError):
        agent.emit_external_event(reply())
    agent.emit_external_event(reply(), config=AgentRunConfig(session_id="a"))
    agent.emit_external_event(reply(), config=AgentRunConfig(session_id="b"))
    await asyncio.gather(session_a.task, session_b.task)


async def test_the_event_reaches_accept_unmodified():
    seen: list[ExternalEvent] = []

    class Inspect(AgentExtension):
        def accept(self, config, event):
            seen.append(event)
            return False

    agent = await Agent.create(ProbeModel(), extensions=[Inspect()])
    event = ExternalEvent("ping", {"nested": {"k": [1, 2]}})
    assert agent.emit_external_event(event, config=AgentRunConfig(session_id="s")) == []
    assert seen[0].name == "ping"
    assert seen[0].payload == {"nested": {"k": [1, 2]}}
    assert event.payload == {"nested": {"k": [1, 2]}}
