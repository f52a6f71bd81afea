"""``AgentExtension``: the base class of every extension.

One request calls the hooks below, each stage on every extension in ``priority`` order (lower
first, ties in registration order). Stages are barriers: every ``on_tool`` finishes before
any ``on_state`` starts, and so on::

    setup     on_tool → on_state → on_message → (input appended) → before_run
    turn      before_turn → before_model → on_model_request (onion around the provider)
              → (answer appended) → after_model
    each tool before_tool → on_tool_call (onion around the handler) → after_tool
              → (result appended)
              after_turn
    end       after_run → on_success            (success)
              on_error                          (failure; never on cancellation)
    anytime   on_event (phase moves, appended messages, cancellation, …)
    compact   on_tool → on_state → on_compact    (Agent.compact)

``accept`` is not a hook of a request: ``Agent.emit_external_event`` calls it synchronously,
possibly from another thread. Every hook here is a no-op, and the runtime skips hooks an
extension does not override, so an unused hook costs nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zett_agent._context import AgentRunConfig, AgentRunContext
    from zett_agent.events import ExternalEvent
    from zett_agent.extensions.events import ExtensionEvent
    from zett_agent.messages import AssistantMessage, ToolCall
    from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
    from zett_agent.tools.base import ToolResult

__all__ = ["AgentExtension"]


class _SetupHooks:
    async def on_tool(self, context: AgentRunContext) -> None:
        """Register local or provider-hosted tools before context restoration."""

    async def on_state(self, context: AgentRunContext) -> None:
        """Restore history and initialize state before any input conversion."""

    async def on_message(self, context: AgentRunContext) -> None:
        """Transform ``context.input_message`` after state restoration, before append."""

    async def before_run(self, context: AgentRunContext) -> None:
        """Run after the transformed user input is appended and published."""


class _TurnHooks:
    async def before_turn(self, context: AgentRunContext) -> None:
        """Run before this turn's model call."""

    async def before_model(self, context: AgentRunContext, request: ModelRequest) -> None:
        """Inspect the current request before preprocessing a primary model call."""

    async def on_model_request(
        self,
        context: AgentRunContext,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], AsyncIterator[ModelEvent]],
    ) -> AsyncIterator[ModelEvent]:
        """Wrap one provider request and its complete streamed response."""
        async with aclosing(call_next(request)) as stream:
            async for event in stream:
                yield event

    async def after_model(self, context: AgentRunContext, response: ModelResponse) -> None:
        """Run after the complete assistant message is appended."""

    async def after_turn(self, context: AgentRunContext, result: AssistantMessage) -> None:
        """Run once the turn's assistant message and tool results are settled."""


class _ToolHooks:
    async def before_tool(self, context: AgentRunContext, call: ToolCall) -> None:
        """Run before one requested tool is invoked."""

    async def on_tool_call(
        self,
        context: AgentRunContext,
        call: ToolCall,
        call_next: Callable[..., Awaitable[Any]],
    ) -> Any:
        """Wrap one registered local tool handler and return its result.

        ``await call_next()`` runs the next layer with ``call`` (arguments edited here
        included); ``call_next(other)`` with another call. It returns what that layer
        returned, at the centre the handler's own value; the outermost layer's value (a
        ``str``, content parts, a ``ToolResult`` or anything JSON-serialisable) becomes
        the ToolMessage. Raising fails the call, not the request.
        """
        return await call_next(call)

    async def after_tool(
        self,
        context: AgentRunContext,
        call: ToolCall,
        result: ToolResult,
        error: Exception | None,
    ) -> None:
        """Inspect or modify a tool result before it is appended."""


class _EndHooks:
    async def after_run(self, context: AgentRunContext, result: AssistantMessage) -> None:
        """Run after a successful final answer is appended."""

    async def on_success(self, context: AgentRunContext, result: AssistantMessage) -> None:
        """Run once after all ``after_run`` hooks succeed, before RUN_COMPLETED."""

    async def on_error(self, context: AgentRunContext, error: Exception) -> None:
        """Observe the exception that failed the request (not called on cancellation)."""

    async def on_compact(self, context: AgentRunContext) -> None:
        """Summarize restored context when a caller asks for compaction."""


class AgentExtension(_SetupHooks, _TurnHooks, _ToolHooks, _EndHooks):
    """Base class every extension derives from; override only the hooks you need."""

    #: Lower runs earlier in every stage and is the outer layer of the middleware onions.
    priority: int = 100

    @property
    def name(self) -> str:
        """Unique registration identity, defaulting to the concrete class name.

        Assign an instance name (or set a class attribute) to register independently
        configured instances of one type; ``Agent(...)`` refuses a name that is not a
        non-empty string.
        """
        return self.__dict__.get("_extension_name", type(self).__name__)

    @name.setter
    def name(self, value: str) -> None:
        self.__dict__["_extension_name"] = value

    @property
    def pending(self) -> bool:
        """Return whether this extension is participating in an active request (of any
        agent it was given to)."""
        agents = self.__dict__.get("_agents")
        if agents is None or agents.owner != id(self):  # none, or a copied extension's
            return False
        return any(agent.pending for agent in list(agents))

    def _given_to(self, agent: Any) -> None:
        """Registered by an ``Agent`` built with this extension (``pending`` asks it)."""
        agents = self.__dict__.get("_agents")
        if agents is None or agents.owner != id(self):
            agents = self.__dict__["_agents"] = _Agents(id(self))
        agents.add(agent)

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        """Observe a notification published during a request."""

    def accept(self, config: AgentRunConfig | None, event: ExternalEvent) -> bool:
        """Claim an external event for a request; return True if this extension took it."""
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r} priority={self.priority}>"


class _Agents(weakref.WeakSet):  # type: ignore[type-arg]
    """The agents an extension (``owner``, its id) was given to, held weakly. A copy of the
    extension, deep or shallow, or one pickled and loaded, has none: it was given to no
    agent yet (a shallow copy shares this set, whose owner it is not)."""

    def __init__(self, owner: int = 0) -> None:
        super().__init__()
        self.owner = owner

    def __copy__(self) -> _Agents:
        return type(self)()

    def __deepcopy__(self, memo: dict[int, Any]) -> _Agents:
        return type(self)()

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return (type(self), ())
