"""The ``ConfirmationExtension`` example of the upstream contract (docs/runtime.md,
External events), verbatim, and what its tests share.

``Session`` runs one request in a task and sets ``requested`` when the confirmation is asked;
``waiting()`` returns once the request is parked on its reply. ``WaitsInBeforeRun`` drives
the wait helpers of ``ExternalEventExtension`` directly, outside any tool.
"""

from __future__ import annotations

import asyncio
import contextlib

from zett_agent.agent import Agent, AgentRunConfig, AgentRunContext
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.external import ExternalEvent, ExternalEventExtension
from zett_agent.messages import ToolCall
from zett_agent.tools.base import tool

from .support import CallThenReport, let_other_tasks_run

T = AgentEventType
CANCELLED_TEXT = "Request cancelled before tool completion"


# --- the contract's confirmation example, verbatim --------------------------------------


# fmt: off
class ConfirmationExtension(ExternalEventExtension):
    def __init__(self) -> None:
        super().__init__(
            response_event_name="confirmation_response",
            correlation_field="tool_call_id",
        )

    async def on_tool(self, context: AgentRunContext) -> None:
        @tool
        async def confirm() -> bool:
            '''Ask the user whether to proceed.

            Snippet:
                confirm()

            Guidelines:
                - Use when proceeding requires an explicit user decision.
            '''
            response = self._take_external_event(context)
            approved = response.payload.get("approved")
            if not isinstance(approved, bool):
                raise ValueError("approved must be a boolean")
            return approved

        context.register_tool(confirm)

    async def before_tool(self, context: AgentRunContext, call: ToolCall) -> None:
        if call.name != "confirm":
            return
        async with self._wait_for_external_event(context, call.id):
            await context.emit(AgentEvent(
                AgentEventType.CUSTOM,
                session_id=context.session_id,
                name="confirmation_requested",
                payload={"tool_call_id": call.id, "question": "Proceed?"},
            ))
# fmt: on


# --- helpers ----------------------------------------------------------------------------


ACCEPTED = ["ConfirmationExtension"]


def confirming_model() -> CallThenReport:
    """Asks for confirmation (call ``call-7``), then reports the tool result it got back."""
    return CallThenReport(ToolCall(id="call-7", name="confirm"))


def reply(call_id: str = "call-7", approved: object = True, **extra) -> ExternalEvent:
    return ExternalEvent(
        name="confirmation_response",
        payload={"tool_call_id": call_id, "approved": approved, **extra},
    )


class Session:
    """Runs one request in a task; ``requested`` is set when the confirmation is asked."""

    def __init__(self, agent: Agent, config: AgentRunConfig) -> None:
        self.agent = agent
        self.config = config
        self.requested = asyncio.Event()
        self.request_event: AgentEvent | None = None
        self.events: list[AgentEvent] = []
        self.task = asyncio.create_task(self._consume())

    @classmethod
    async def parked(cls, agent: Agent, config: AgentRunConfig) -> Session:
        """Start a request on ``config`` and return once it waits for its confirmation."""
        session = cls(agent, config)
        await session.waiting()
        return session

    async def _consume(self):
        async with contextlib.aclosing(self.agent.stream("Deploy?", config=self.config)) as stream:
            async for event in stream:
                self.events.append(event)
                if event.type is T.CUSTOM and event.name == "confirmation_requested":
                    self.request_event = event
                    self.requested.set()
        return self.events[-1].message

    async def waiting(self) -> None:
        """Return once the request is parked on its confirmation."""
        await self.requested.wait()
        await let_other_tasks_run()


async def confirmation_agent(config: AgentRunConfig | None = None, *extra: AgentExtension):
    return await Agent.create(
        confirming_model(), config=config, extensions=[ConfirmationExtension(), *extra]
    )


async def waiting_session(
    config: AgentRunConfig, *extensions: AgentExtension
) -> tuple[Agent, Session]:
    """An agent (with ``extensions``, else one ``ConfirmationExtension``) whose request on
    ``config`` is parked on its confirmation."""
    agent = await Agent.create(
        confirming_model(), config=config, extensions=list(extensions) or [ConfirmationExtension()]
    )
    return agent, await Session.parked(agent, config)


class WaitsInBeforeRun(ExternalEventExtension):
    """Runs ``action(self, context)`` in ``before_run`` and keeps the error it raises.

    Its replies are events named ``answer``, correlated by their ``id`` field.
    """

    def __init__(self, action) -> None:
        super().__init__(response_event_name="answer", correlation_field="id")
        self.action = action
        self.errors: list[Exception] = []

    async def before_run(self, context):
        try:
            await self.action(self, context)
        except Exception as error:
            self.errors.append(error)


async def waiting_in_a_task(extension, context, key: str) -> asyncio.Task:
    """Start ``extension``'s wait for ``key`` in a task; return once it is registered."""
    registered = asyncio.Event()

    async def wait():
        async with extension._wait_for_external_event(context, key):
            registered.set()

    waiter = asyncio.create_task(wait())
    await registered.wait()
    return waiter
