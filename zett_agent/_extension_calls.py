"""What an extension asks of the request it runs in, through its context (mixed into
``zett_agent._request.Request``).

``AgentRunContext`` hands these on (through the protocol ``_LiveRequest`` of
``zett_agent._context``): emitting an event (``emit_from_extension``, or ``relay`` for a
sub-run's), ending the request after its tools, publishing an ``ExtensionEvent`` to one
extension or all, leaving hooks, and appending a message now. An event emitted from a
tool's own subtask is handed to the driver, which waits until the consumer took it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zett_agent._driver import Driver, emission
from zett_agent._hooks import HookTable
from zett_agent._inbox import RequestInbox
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.events import (
    ExtensionEvent,
    InternalMessageEvent,
    MessageTiming,
    SteeringMessageEvent,
)
from zett_agent.messages import AnyMessage
from zett_agent.phases import AgentPhase

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from datetime import datetime

    from zett_agent._context import AgentRunContext
    from zett_agent.extensions.base import AgentExtension

__all__ = ["ExtensionCalls"]

E = AgentEventType
P = AgentPhase


class ExtensionCalls:
    """Mixed into ``Request``: the calls an extension makes into it."""

    hooks: HookTable
    inbox: RequestInbox
    context: AgentRunContext
    driver: Driver | None
    _setup: bool
    _ending: bool

    if TYPE_CHECKING:

        def emit(self, event: AgentEvent) -> Awaitable[None]: ...
        def move(self, target: AgentPhase) -> Awaitable[tuple[datetime, int] | None]: ...
        def flush(self) -> Awaitable[None]: ...
        def append(
            self, message: AnyMessage, timing: MessageTiming | None = None, usage: object = None
        ) -> Awaitable[None]: ...

    async def emit_from_extension(self, event: AgentEvent) -> None:
        if self.context.state.phase.is_terminal:
            raise AgentProtocolError(
                f"Cannot emit {event.type.value}: the request is {self.context.state.phase.value}"
            )
        driver = self.driver
        if driver is not None and not driver.stepping:
            event.phase = self.context.state.phase
            await driver.emit_foreign(event)  # a tool's subtask: hand over, wait until taken
            return
        # A compaction announces itself: STARTED moves READY to COMPACTING, COMPLETED
        # moves back (an error in between leaves COMPACTING for FAILED or CANCELLED).
        phase = self.context.state.phase
        if event.type is E.COMPACTION_STARTED and phase is P.READY:
            await self.move(P.COMPACTING)
        elif event.type is E.COMPACTION_COMPLETED and phase is P.COMPACTING:
            await self.move(P.READY)
        await self.emit(event)

    async def relay(self, event: AgentEvent) -> None:
        """Hand a sub-run's event to the consumer as it is (its own phase kept)."""
        if self.context.state.phase.is_terminal:
            raise AgentProtocolError(
                f"Cannot relay {event.type.value}: the request is {self.context.state.phase.value}"
            )
        driver = self.driver
        if driver is not None and not driver.stepping:
            await driver.emit_foreign(event)  # from a tool's subtask
            return
        await emission(event)

    def end_after_tools(self) -> None:
        if self.context.state.phase.is_terminal:
            raise AgentProtocolError("Cannot end a request that has ended")
        self._ending = True

    async def publish(
        self, event: ExtensionEvent, *, target: AgentExtension | str | type | None = None
    ) -> None:
        if not isinstance(event, ExtensionEvent):
            raise TypeError(f"publish needs an ExtensionEvent, got {type(event).__name__}")
        if type(event) is SteeringMessageEvent:
            if not self.inbox.push_steering(event.message):
                raise AgentProtocolError(
                    "The request does not accept steering messages (it has settled its "
                    "final answer, or it is a compaction pass)"
                )
        elif type(event) is InternalMessageEvent and not self.inbox.push_internal(
            event.message, within_limit=False
        ):
            raise AgentProtocolError(
                "The request does not accept internal messages (it has settled its final "
                "answer, or it is a compaction pass)"
            )
        context = self.context
        if target is None:
            for extension in self.hooks.on_event:
                await extension.on_event(context, event)
            return
        await self._target(target).on_event(context, event)

    def withdraw(self, extension: AgentExtension) -> None:
        """Leave ``extension`` out of every later hook of this request."""
        self.hooks = self.hooks.without(extension)

    def _target(self, target: AgentExtension | str | type) -> AgentExtension:
        """The one extension ``target`` names: an instance, a name, or a class."""
        extensions = self.hooks.extensions
        if isinstance(target, type):
            matches = [extension for extension in extensions if isinstance(extension, target)]
            if len(matches) > 1:
                names = ", ".join(extension.name for extension in matches)
                raise ValueError(
                    f"Publish target {target.__name__} is ambiguous: {names} are all "
                    "registered; name one"
                )
        else:
            matches = [
                extension
                for extension in extensions
                if extension is target or extension.name == target
            ]
        if not matches:
            raise ValueError(f"No extension {target!r} is registered on this agent")
        return matches[0]

    async def append_now(self, message: AnyMessage, timing: MessageTiming | None) -> None:
        """``context.append_message``: after the stage's earlier additions, published now.

        During setup it waits like ``add_message`` (setup additions are published after
        ``on_message``, before the input).
        """
        if self._setup:
            self.context.add_message(message)
            return
        await self.flush()
        await self.append(message, timing)
