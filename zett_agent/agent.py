"""``Agent``: runs requests of many sessions, one active request per session.

The loop itself lives in ``zett_agent._request`` and the back-pressure machinery in
``zett_agent._driver``; this module owns construction, session claims and routing of
external events. Choices where the contract (docs/runtime.md) is silent:

- ``get_state(session_id)`` returns the active request's state, else the last finished
  one of that session (kept for the ``FINISHED_STATES_KEPT`` most recently finished
  sessions, so a long-lived agent serving many sessions does not grow), else None;
- the agent's built-in ``InternalMessageExtension`` and ``SteeringExtension`` are
  registered after the caller's extensions (priority 100, so they keep that place among
  equals);
- ``context.emit`` may also be awaited from another task of the request (a tool's
  subtasks reporting progress): the event is handed to the consumer while the runtime
  waits, and the emitter resumes once it was taken (see ``_driver``);
- when the model stops abnormally (MODEL_STOPPED) its tool calls are neither executed nor
  given ToolMessages; memory and persistence drop such unanswered batches on restore.

``resume_stream`` / ``resume`` continue a session whose stored history ends in tool calls
without results (a wait that outlived its process): the session is claimed like a request,
``on_tool`` and ``on_state`` restore the history, no input is appended, the open calls run
through the usual tool hooks (replies that arrived meanwhile are handed to their waits, so
nothing waits for them) and the turn loop goes on. ``zett_agent._resume`` has the rules.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from datetime import datetime
from typing import Any

from zett_agent._context import AgentRunConfig, AgentRunContext, AgentState, uuid7
from zett_agent._driver import Driver, drive
from zett_agent._hooks import HookTable
from zett_agent._inbox import RequestInbox
from zett_agent._json import request_metadata, request_tags
from zett_agent._request import Request
from zett_agent._resume import Resumption
from zett_agent.events import AgentEvent, AgentEventType, ExternalEvent
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import CompactionEvent
from zett_agent.extensions.internal_message import InternalMessageExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.extensions.steering import SteeringExtension
from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
from zett_agent.messages import AssistantMessage, SystemMessage, UserMessage
from zett_agent.model import AgentModel
from zett_agent.tools.base import AgentTool

__all__ = ["Agent", "AgentRunConfig", "AgentRunContext", "AgentState"]

_BUILTIN_TYPES = (InternalMessageExtension, SteeringExtension)

#: How many sessions' last finished states ``get_state`` remembers.
FINISHED_STATES_KEPT = 1024


_new = object.__new__
_set = object.__setattr__


class Agent:
    """A model, a system prompt, tools and ordered extensions, serving many sessions.

    Build it with ``await Agent.create(model, ...)`` (or construct, then ``await
    agent.initialize(config)``). ``extensions=None`` means the defaults
    ``[InMemoryMessageAccumulator(), ToolGuidelinesExtension()]``; an explicit list, even
    an empty one, replaces them.
    """

    def __init__(
        self,
        model: AgentModel,
        *,
        system_prompt: str | None = "You are a helpful assistant.",
        tools: Iterable[AgentTool] = (),
        extensions: Sequence[AgentExtension] | None = None,
        max_iterations: int = 36,
        max_internal_messages: int = 8,
    ) -> None:
        if not callable(getattr(model, "stream", None)):
            raise TypeError(f"model must have a stream(request) method, got {model!r}")
        _check_limits(max_iterations, max_internal_messages)
        self.model = model
        #: Opt-in, set after construction (the constructor's signature is the contract's):
        #: a steering message ends a model call that streams text at once, instead of
        #: waiting for its response (``zett_agent._interrupt``). Read when a request starts.
        self.steering_interrupts_stream = False
        self.system_prompt = system_prompt
        self.max_iterations = max_iterations
        self.max_internal_messages = max_internal_messages
        self.tools: dict[str, AgentTool] = _tools_by_name(tools)
        self._inboxes: dict[str, RequestInbox] = {}
        self.extensions: tuple[AgentExtension, ...] = _ordered_extensions(extensions, self._inboxes)
        self._hooks = HookTable(self.extensions)

        self._initialized_config: AgentRunConfig | None = None
        self._initialized = False
        self._latest: AgentState | None = None
        self._lock = threading.Lock()
        self._active: dict[str, Request] = {}
        self._last_state: dict[str, AgentState] = {}
        for extension in self.extensions:
            # ``AgentExtension.pending`` asks its agents (weakly held): no count is kept
            # per extension and request.
            extension._given_to(self)

    @classmethod
    async def create(
        cls,
        model: AgentModel,
        *,
        config: AgentRunConfig | None = None,
        system_prompt: str | None = "You are a helpful assistant.",
        tools: Iterable[AgentTool] = (),
        extensions: Sequence[AgentExtension] | None = None,
        max_iterations: int = 36,
        max_internal_messages: int = 8,
    ) -> Agent:
        """Construct and initialize an agent."""
        agent = cls(
            model,
            system_prompt=system_prompt,
            tools=tools,
            extensions=extensions,
            max_iterations=max_iterations,
            max_internal_messages=max_internal_messages,
        )
        await agent.initialize(config)
        return agent

    async def initialize(self, config: AgentRunConfig | None = None) -> None:
        """Make the agent usable and bind its default session.

        ``config`` supplies the session (and request id) of requests that name none;
        without one (or without a session id in it) a new UUIDv7 session is the default,
        so later ``run()`` calls without a config continue one conversation. Initializing
        again is harmless for the same session and an ``AgentProtocolError`` for another.
        """
        if config is not None and not isinstance(config, AgentRunConfig):
            raise TypeError(f"config must be an AgentRunConfig, got {type(config).__name__}")
        current = self._initialized_config
        if current is not None:
            if config is not None and config.session_id not in (None, current.session_id):
                raise AgentProtocolError(
                    f"Agent is already initialized for another session "
                    f"({current.session_id!r}, not {config.session_id!r})"
                )
            return
        if config is None or config.session_id is None:
            config = AgentRunConfig(
                session_id=uuid7(),
                request_id=config.request_id if config else None,
                parent_session_id=config.parent_session_id if config else None,
            )
        self._initialized_config = config
        self._initialized = True

    @property
    def config(self) -> AgentRunConfig | None:
        """The config bound at initialization (its session is the default), else None."""
        return self._initialized_config

    @property
    def state(self) -> AgentState:
        """The state of the latest request this agent started, whatever its session.

        Before any request it is an empty state (no messages, CREATED). With several
        sessions, ``get_state(session_id)`` is the one to ask.
        """
        latest = self._latest
        if latest is None:
            session_id = self._initialized_config.session_id if self._initialized_config else ""
            latest = AgentState(session_id or "", "")
        return latest

    @property
    def pending(self) -> bool:
        """True while any session has an active request."""
        return bool(self._active)

    def is_conflict(self, session_id: str) -> bool:
        """True when ``session_id`` has an active request (a new one would be refused).

        The id is stripped as ``AgentRunConfig`` strips it; a blank one is a ``ValueError``.
        """
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
        normalised = session_id.strip()
        if not normalised:
            raise ValueError("session_id cannot be empty")
        return normalised in self._active

    def get_state(self, session_id: str) -> AgentState | None:
        """The active request's state of a session, else its last finished one."""
        request = self._active.get(session_id)
        if request is not None:
            return request.context.state
        return self._last_state.get(session_id)

    # -- requests ------------------------------------------------------------------------

    def stream(
        self,
        message: str | UserMessage,
        *,
        config: AgentRunConfig | None = None,
        model: AgentModel | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run one request and yield its events; the runtime waits for the consumer.

        The session is claimed when iteration starts, so an iterator that is never
        iterated holds nothing; an agent that was never initialized is refused at once.
        """
        if isinstance(message, str):
            message = UserMessage(message)
        elif not isinstance(message, UserMessage):
            raise TypeError(f"message must be a str or a UserMessage, got {type(message).__name__}")
        self._require_initialized()
        return self._events(config, model, message, request_metadata(metadata), request_tags(tags))

    async def run(
        self,
        message: str | UserMessage,
        *,
        config: AgentRunConfig | None = None,
        model: AgentModel | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
    ) -> AssistantMessage:
        """Run one request to its end and return the final assistant message."""
        return await _final_answer(
            self.stream(message, config=config, model=model, metadata=metadata, tags=tags)
        )

    def resume_stream(
        self,
        *,
        config: AgentRunConfig | None = None,
        replies: Iterable[ExternalEvent] = (),
        deadlines: Mapping[str, datetime] | None = None,
        model: AgentModel | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Continue a session whose history ends in open tool calls; yield the events.

        Claims the session like ``stream`` and restores it (``on_tool``, ``on_state``; no
        ``on_message``, no input). The open calls (those of the last assistant message
        without a result) then run one at a time through the usual tool hooks, and the turn
        loop continues to a final answer. With no open calls, a history that ends with a
        user or agent message or a settled tool batch continues with a model call; one that
        is empty or ends with a final answer fails with ``AgentProtocolError``.

        ``replies``: external events that arrived while nobody was waiting; each must
        answer a different open call of an ``ExternalEventExtension`` (else the request
        fails with ``AgentProtocolError``) and is handed to that call's wait when it
        registers, so it does not wait. ``deadlines``: correlation id → aware datetime,
        used instead of ``now + timeout`` for the waits that restart.
        """
        resumption = Resumption(replies, deadlines)
        self._require_initialized()
        return self._events(
            config,
            model,
            None,
            request_metadata(metadata),
            request_tags(tags),
            resumption,
        )

    async def resume(
        self,
        *,
        config: AgentRunConfig | None = None,
        replies: Iterable[ExternalEvent] = (),
        deadlines: Mapping[str, datetime] | None = None,
        model: AgentModel | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
    ) -> AssistantMessage:
        """Resume a session to its end (see ``resume_stream``); return the final answer."""
        return await _final_answer(
            self.resume_stream(
                config=config,
                replies=replies,
                deadlines=deadlines,
                model=model,
                metadata=metadata,
                tags=tags,
            )
        )

    def compact_stream(
        self, *, config: AgentRunConfig | None = None, model: AgentModel | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Run a compaction pass for a session and yield the events it emits."""
        self._require_initialized()
        return self._events(config, model, None, None, None)

    async def compact(
        self, *, config: AgentRunConfig | None = None, model: AgentModel | None = None
    ) -> CompactionEvent | None:
        """Run a compaction pass; return the applied compaction, or None."""
        applied: CompactionEvent | None = None
        async with aclosing(self.compact_stream(config=config, model=model)) as events:
            async for event in events:
                if event.type is AgentEventType.COMPACTION_COMPLETED and event.applied:
                    applied = event.compaction
        return applied

    def _events(
        self,
        config: AgentRunConfig | None,
        model: AgentModel | None,
        message: UserMessage | None,
        metadata: dict[str, Any] | None,
        tags: dict[str, Any] | None,
        resumption: Resumption | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Claim the session when iteration starts, then drive the request in the
        consumer's task (``_driver``)."""

        def start() -> Driver:
            request = self._claim(config, model, message, metadata, tags, resumption)
            driver = request.driver = Driver(request.execute())
            return driver

        return drive(start)

    def _require_initialized(self) -> None:
        if not self._initialized:
            raise AgentProtocolError(
                "Agent is not initialized: use `await Agent.create(...)` "
                "or `await agent.initialize()`"
            )

    def _resolve_config(self, config: AgentRunConfig | None) -> AgentRunConfig:
        if config is not None and not isinstance(config, AgentRunConfig):
            raise TypeError(f"config must be an AgentRunConfig, got {type(config).__name__}")
        default = self._initialized_config
        base = config or default or AgentRunConfig()
        session_id = base.session_id or (default and default.session_id) or uuid7()
        # Every id here is normalised already (a config's own, or a new UUID): the frozen
        # slots are filled directly instead of normalising them again in __post_init__.
        resolved = _new(AgentRunConfig)
        _set(resolved, "session_id", session_id)
        _set(resolved, "request_id", base.request_id or uuid7())
        _set(resolved, "parent_session_id", base.parent_session_id)
        return resolved

    def _claim(
        self,
        config: AgentRunConfig | None,
        model: AgentModel | None,
        message: UserMessage | None,
        metadata: dict[str, Any] | None,
        tags: dict[str, Any] | None,
        resumption: Resumption | None,
    ) -> Request:
        resolved = self._resolve_config(config)
        session_id = resolved.session_id
        assert session_id is not None and resolved.request_id is not None
        inbox = RequestInbox(resolved.request_id, self.max_internal_messages)
        if message is None and resumption is None:
            inbox.close()  # a compaction pass never answers steering or internal messages
        request = Request(
            hooks=self._hooks,
            max_iterations=self.max_iterations,
            inbox=inbox,
            release=self._release,
            resumption=resumption,
            compaction=message is None and resumption is None,
            steering_interrupts_stream=self.steering_interrupts_stream is True,
        )
        context = AgentRunContext(
            request=request,
            config=resolved,
            model=model or self.model,
            input_message=message,
            tools=dict(self.tools),
            extensions=self.extensions,
            # ``request_metadata`` / ``request_tags`` made these dicts for this request
            metadata={} if metadata is None else metadata,
            tags={} if tags is None else tags,
            resumption=resumption,
        )
        if self.system_prompt:
            context.state._messages.append(SystemMessage(self.system_prompt))
            context.state._snapshot = None
        request.context = context
        with self._lock:
            active = self._active.get(session_id)
            if active is not None:
                raise AgentProtocolError(
                    f"Session {session_id!r} cannot start a new request while its current "
                    f"phase is {active.context.state.phase.value!r} (request "
                    f"{active.context.request_id!r}); wait for it or cancel it first"
                )
            self._active[session_id] = request
            self._inboxes[session_id] = inbox
            self._latest = context.state
        for extension in self._hooks.gated:
            # Out of this request from its start (a tracer with nothing to record): no
            # event is built for it, no hook called (``zett_agent._hooks``).
            if not extension._takes_part(context):  # type: ignore[attr-defined]
                request.hooks = request.hooks.without(extension)  # ``withdraw``
        return request

    def _release(self, request: Request) -> None:
        session_id = request.context.config.session_id
        with self._lock:
            if self._active.get(session_id) is request:
                del self._active[session_id]
            if self._inboxes.get(session_id) is request.inbox:
                del self._inboxes[session_id]
            finished = self._last_state
            finished.pop(session_id, None)
            finished[session_id] = request.context.state
            if len(finished) > FINISHED_STATES_KEPT:
                del finished[next(iter(finished))]

    # -- external events -----------------------------------------------------------------

    def emit_external_event(
        self, event: ExternalEvent, *, config: AgentRunConfig | None = None
    ) -> list[str]:
        """Offer an external reply to every extension; return the names that accepted it.

        Synchronous and thread-safe. Without ``config`` the reply goes to the single active
        request, else to the initialized config; with several active sessions a config is
        required. Neither the event nor its payload is modified or read for routing.
        """
        if not isinstance(event, ExternalEvent):
            raise TypeError(f"emit_external_event needs an ExternalEvent, got {event!r}")
        if config is not None and not isinstance(config, AgentRunConfig):
            raise TypeError(f"config must be an AgentRunConfig, got {type(config).__name__}")
        self._require_initialized()
        if config is None:
            with self._lock:
                active = list(self._active.values())
            if len(active) > 1:
                raise AgentProtocolError(
                    f"{len(active)} sessions are active: external events require config="
                    "AgentRunConfig(session_id=…) to say which one they are for"
                )
            config = active[0].context.config if active else self._initialized_config
        return [extension.name for extension in self.extensions if extension.accept(config, event)]

    def __repr__(self) -> str:
        return (
            f"<Agent model={type(self.model).__name__} extensions="
            f"{[extension.name for extension in self.extensions]} active={len(self._active)}>"
        )


def _check_limits(max_iterations: int, max_internal_messages: int) -> None:
    """Refuse a limit that is no count (bool is an int subclass, but True is no count)."""
    if (
        isinstance(max_iterations, bool)
        or not isinstance(max_iterations, int)
        or max_iterations < 1
    ):
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations!r}")
    if (
        isinstance(max_internal_messages, bool)
        or not isinstance(max_internal_messages, int)
        or max_internal_messages < 0
    ):
        raise ValueError(
            f"max_internal_messages must be a non-negative integer, got {max_internal_messages!r}"
        )


def _tools_by_name(tools: Iterable[AgentTool]) -> dict[str, AgentTool]:
    """The agent's tools by name, each an ``AgentTool`` with a name of its own."""
    by_name: dict[str, AgentTool] = {}
    for agent_tool in tools:
        if not isinstance(agent_tool, AgentTool):
            raise TypeError(f"tools must be AgentTool objects (use @tool), got {agent_tool!r}")
        if agent_tool.name in by_name:
            raise ValueError(f"Tool names must be unique: two tools are named {agent_tool.name!r}")
        by_name[agent_tool.name] = agent_tool
    return by_name


def _ordered_extensions(
    extensions: Sequence[AgentExtension] | None, inboxes: dict[str, RequestInbox]
) -> tuple[AgentExtension, ...]:
    """The given extensions (None: the defaults) and the built-ins, by priority.

    Each must be an ``AgentExtension`` with a unique, non-empty name, and none a built-in:
    every agent has its own, reading ``inboxes``.
    """
    if extensions is None:
        chosen: list[AgentExtension] = [InMemoryMessageAccumulator(), ToolGuidelinesExtension()]
    else:
        chosen = list(extensions)
    for extension in chosen:
        if not isinstance(extension, AgentExtension):
            raise TypeError(f"extensions must be AgentExtension objects, got {extension!r}")
        if isinstance(extension, _BUILTIN_TYPES):
            raise ValueError(
                f"{type(extension).__name__} is an Agent built-in: every Agent has its "
                "own; do not pass one"
            )
    chosen += [InternalMessageExtension(inboxes), SteeringExtension(inboxes)]
    names: set[str] = set()
    for extension in chosen:
        name = extension.name
        if not isinstance(name, str) or not name.strip():
            raise ValueError(
                f"Extension names must be non-empty strings: {type(extension).__name__} "
                f"has name {name!r}"
            )
        if name in names:
            raise ValueError(f"Duplicate extension name {name!r}: extension names must be unique")
        names.add(extension.name)
    return tuple(sorted(chosen, key=lambda extension: extension.priority))


async def _final_answer(events: AsyncIterator[AgentEvent]) -> AssistantMessage:
    """Consume a request's events to the end; return the message of its RUN_COMPLETED."""
    final: AssistantMessage | None = None
    async with aclosing(events) as stream:
        async for event in stream:
            if event.type is AgentEventType.RUN_COMPLETED:
                final = event.message  # type: ignore[assignment]
    if final is None:  # pragma: no cover - the runtime always ends with RUN_COMPLETED
        raise AgentProtocolError("The request ended without RUN_COMPLETED")
    return final
