"""A steer cuts a real adapter's stream short (``agent.steering_interrupts_stream``): the
HTTP response is closed while the provider is silent, and the next call answers the steer
with what the model had written in view."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.external import ExternalEvent

from . import anthropic_events, openai_chunks
from .fake_server import FakeServer, Reply
from .support import Adapters

CONFIG = AgentRunConfig(session_id="s")


async def steered_run(agent: Agent, written: asyncio.Event) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    async with contextlib.aclosing(agent.stream("Write a lot", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is AgentEventType.TEXT_DELTA:
                written.set()
    return events


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_steer_closes_the_silent_provider_stream_and_the_next_call_answers_it(
    provider: str, server: FakeServer, adapters: Adapters
) -> None:
    if provider == "openai":
        model = adapters.openai()
        first, second = openai_chunks.text_stream("Once upon")[:2], openai_chunks.text_stream("Ok.")
    else:
        model = adapters.anthropic()
        first = anthropic_events.text_stream("Once upon")[:4]
        second = anthropic_events.text_stream("Ok.")
    # The first answer writes "Once upon", then the provider says nothing more.
    server.reply(Reply.stream(first, hold=True), Reply.stream(second))
    agent = await Agent.create(model, extensions=[])
    agent.steering_interrupts_stream = True
    written = asyncio.Event()
    run = asyncio.create_task(steered_run(agent, written))
    await written.wait()
    steer = ExternalEvent("steering_message", {"content": "Keep it short"})
    assert agent.emit_external_event(steer, config=CONFIG) == ["SteeringExtension"]
    events = await run
    await asyncio.wait_for(server.disconnected.wait(), timeout=5)
    assert events[-1].message.content == "Ok."
    cut = next(e for e in events if e.type is AgentEventType.MODEL_COMPLETED).response
    assert (cut.finish_reason, cut.message.content) == ("interrupted", "Once upon")
    sent = server.requests[1].json()["messages"]
    said = [(m["role"], m["content"]) for m in sent if m["role"] != "system"]
    if provider == "anthropic":
        said = [(role, [block["text"] for block in blocks]) for role, blocks in said]
        assert said == [
            ("user", ["Write a lot"]),
            ("assistant", ["Once upon"]),
            ("user", ["Keep it short"]),
        ]
    else:
        assert said == [
            ("user", "Write a lot"),
            ("assistant", "Once upon"),
            ("user", "Keep it short"),
        ]
