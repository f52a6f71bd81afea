"""The helpers ``ExternalEventExtension`` gives its subclasses (seed 000):
``_wait_for_external_event``, ``_take_external_event``, several response names, ``pending``.
"""

from __future__ import annotations

import asyncio
import contextlib

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.external import ExternalEvent, ExternalEventExtension
from zett_agent.tools.base import tool

from .confirmation import (
    ConfirmationExtension,
    ConfirmModel,
    Session,
    reply,
)
from .support import ProbeModel, answer

T = AgentEventType


async def test_a_second_wait_for_the_same_key_is_an_error():
    errors: list[Exception] = []
    registered = asyncio.Event()

    class Twice(ExternalEventExtension):
        def __init__(self) -> None:
            super().__init__(response_event_name="answer", correlation_field="id")

        async def before_run(self, context):
            async def first_wait():
                async with self._wait_for_external_event(context, "op-1"):
                    registered.set()

            first = asyncio.create_task(first_wait())
            await registered.wait()
            try:
                async with self._wait_for_external_event(context, "op-1"):
                    pass
            except RuntimeError as error:
                errors.append(error)
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await first

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Twice()])
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    assert len(errors) == 1


async def test_a_blank_correlation_id_is_rejected():
    errors: list[Exception] = []

    class Blank(ExternalEventExtension):
        def __init__(self) -> None:
            super().__init__(response_event_name="answer", correlation_field="id")

        async def before_run(self, context):
            try:
                async with self._wait_for_external_event(context, " "):
                    pass
            except ValueError as error:
                errors.append(error)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Blank()])
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    assert len(errors) == 1


async def test_taking_a_reply_that_was_never_staged_is_an_error():
    errors: list[Exception] = []

    class Eager(ExternalEventExtension):
        def __init__(self) -> None:
            super().__init__(response_event_name="answer", correlation_field="id")

        async def before_run(self, context):
            try:
                self._take_external_event(context)
            except RuntimeError as error:
                errors.append(error)

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Eager()])
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    assert len(errors) == 1


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

    config = AgentRunConfig(session_id="s")
    agent = await Agent.create(ConfirmModel(), config=config, extensions=[Greedy()])
    session = Session(agent, config)
    await session.waiting()
    agent.emit_external_event(reply(), config=config)
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

    config = AgentRunConfig(session_id="s")
    agent = await Agent.create(ConfirmModel(), config=config, extensions=[Either()])
    session = Session(agent, config)
    await session.waiting()
    event = ExternalEvent(name="approval", payload={"tool_call_id": "call-7", "approved": True})
    assert agent.emit_external_event(event, config=config) == ["Either"]
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

    config = AgentRunConfig(session_id="s")
    agent = await Agent.create(ConfirmModel(), config=config, extensions=[Strict()])
    session = Session(agent, config)
    await session.waiting()
    assert agent.emit_external_event(reply(), config=config) == []
    approval = ExternalEvent(name="approval", payload={"tool_call_id": "call-7", "approved": True})
    assert agent.emit_external_event(approval, config=config) == ["Strict"]
    await session.task


async def test_the_extension_is_pending_only_during_a_request():
    config = AgentRunConfig(session_id="s")
    extension = ConfirmationExtension()
    agent = await Agent.create(ConfirmModel(), config=config, extensions=[extension])
    assert extension.pending is False
    session = Session(agent, config)
    await session.waiting()
    assert extension.pending is True
    agent.emit_external_event(reply(), config=config)
    await session.task
    assert extension.pending is False
