"""The helpers ``ExternalEventExtension`` gives its subclasses (the confirmation example of
docs/runtime.md):
``_wait_for_external_event``, ``_take_external_event``, several response names, ``pending``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import pickle

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.external import ExternalEvent, ExternalEventExtension
from zett_agent.tools.base import tool

from .confirmation import (
    ConfirmationExtension,
    Session,
    WaitsInBeforeRun,
    confirming_model,
    reply,
    waiting_in_a_task,
    waiting_session,
)
from .support import ProbeModel, answer

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
APPROVAL = ExternalEvent(name="approval", payload={"tool_call_id": "call-7", "approved": True})


async def wait_twice_for_one_key(extension, context):
    first = await waiting_in_a_task(extension, context, "op-1")
    try:
        async with extension._wait_for_external_event(context, "op-1"):
            pass
    finally:
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first


async def wait_for_a_blank_id(extension, context):
    async with extension._wait_for_external_event(context, " "):
        pass


async def take_a_reply_that_was_never_staged(extension, context):
    extension._take_external_event(context)


@pytest.mark.parametrize(
    ("misuse", "error"),
    [
        pytest.param(wait_twice_for_one_key, RuntimeError, id="a second wait for the same key"),
        pytest.param(wait_for_a_blank_id, ValueError, id="a blank correlation id"),
        pytest.param(
            take_a_reply_that_was_never_staged,
            RuntimeError,
            id="taking a reply that was never staged",
        ),
    ],
)
async def test_misusing_the_wait_helpers_is_an_error(misuse, error):
    waits = WaitsInBeforeRun(misuse)
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[waits])
    await agent.run("hi", config=CONFIG)
    assert [type(e) for e in waits.errors] == [error]


async def test_a_staged_reply_can_be_taken_only_once():
    taken: list[object] = []

    class Greedy(ConfirmationExtension):
        async def on_tool(self, context):
            @tool
            async def confirm() -> str:
                """Ask twice.

                Guidelines:
                    - Use in tests.
                """
                taken.append(self._take_external_event(context))
                try:
                    self._take_external_event(context)
                except RuntimeError as error:
                    taken.append(error)
                return "ok"

            context.register_tool(confirm)

    agent, session = await waiting_session(CONFIG, Greedy())
    agent.emit_external_event(reply(), config=CONFIG)
    await session.task
    first, second = taken
    assert isinstance(first, ExternalEvent)
    assert first.payload == {"tool_call_id": "call-7", "approved": True}
    assert isinstance(second, RuntimeError)


async def test_an_extension_may_accept_several_response_names():
    class Either(ConfirmationExtension):
        def __init__(self) -> None:
            ExternalEventExtension.__init__(
                self,
                response_event_name=("confirmation_response", "approval"),
                correlation_field="tool_call_id",
            )

    agent, session = await waiting_session(CONFIG, Either())
    assert agent.emit_external_event(APPROVAL, config=CONFIG) == ["Either"]
    await session.task


async def test_a_wait_may_restrict_itself_to_one_of_the_configured_names():
    class Strict(ConfirmationExtension):
        def __init__(self) -> None:
            ExternalEventExtension.__init__(
                self,
                response_event_name=["confirmation_response", "approval"],
                correlation_field="tool_call_id",
            )

        async def before_tool(self, context, call):
            async with self._wait_for_external_event(
                context, call.id, response_event_name="approval"
            ):
                await context.emit(
                    AgentEvent(
                        T.CUSTOM,
                        session_id=context.session_id,
                        name="confirmation_requested",
                        payload={"tool_call_id": call.id},
                    )
                )

    agent, session = await waiting_session(CONFIG, Strict())
    assert agent.emit_external_event(reply(), config=CONFIG) == []
    assert agent.emit_external_event(APPROVAL, config=CONFIG) == ["Strict"]
    await session.task


async def test_the_extension_is_pending_only_during_a_request():
    extension = ConfirmationExtension()
    agent = await Agent.create(confirming_model(), config=CONFIG, extensions=[extension])
    assert extension.pending is False
    session = await Session.parked(agent, CONFIG)
    assert extension.pending is True
    agent.emit_external_event(reply(), config=CONFIG)
    await session.task
    assert extension.pending is False


async def test_an_extension_given_to_two_agents_is_pending_while_either_runs():
    extension = ConfirmationExtension()
    idle = await Agent.create(confirming_model(), config=CONFIG, extensions=[extension])
    agent = await Agent.create(confirming_model(), config=CONFIG, extensions=[extension])
    session = await Session.parked(agent, CONFIG)
    assert idle.pending is False
    assert extension.pending is True
    agent.emit_external_event(reply(), config=CONFIG)
    await session.task
    assert extension.pending is False
    del idle  # an agent gone is no longer asked
    assert extension.pending is False


class Watching(AgentExtension):
    """Says, while its request runs, whether it and copies of it are pending."""

    seen: tuple[bool, ...] = ()
    original: Watching | None = None

    async def before_run(self, context) -> None:
        copies = (copy.copy(self), copy.deepcopy(self), pickle.loads(pickle.dumps(self)))
        self.seen = (self.pending, *(c.pending for c in copies))
        if self.original is not None:
            self.seen += (self.original.pending,)


async def test_a_copy_of_an_extension_was_given_to_no_agent():
    extension = Watching()
    agent = await Agent.create(ProbeModel(answer("one")), extensions=[extension])
    await agent.run("hi", config=CONFIG)
    assert extension.seen == (True, False, False, False)
    shallow = copy.copy(extension)  # shares the original's attributes, not its agents
    shallow.original = extension
    other = await Agent.create(ProbeModel(answer("two")), extensions=[shallow])
    await other.run("hi", config=CONFIG)
    assert shallow.seen == (True, False, False, False, False)
