"""One request's lifecycle: setup, turns, tools, and how it ends.

Order (docs/runtime.md, Hooks): setup stages run as barriers (every ``on_tool`` before any
``on_state``); each turn calls the model through the ``on_model_request`` onion, appends its
answer, then runs the requested tools one at a time through the ``on_tool_call`` onion
(``zett_agent._tool_turn``, ``zett_agent._tool_call``).
Checkpoints after every model response and every tool let steering supersede the rest of a turn.

Three kinds of request share this loop: a new input (``Agent.stream``); a resume
(``Agent.resume_stream``: no input, the restored history's open tool calls run as the tool
phase of their turn, then the turns go on, see ``zett_agent._resume``); and a compaction
pass (``Agent.compact``: no input, only ``on_compact``).

Endings:

- success: ``after_turn`` → ``after_run`` → ``on_success`` → COMPLETED → RUN_COMPLETED;
- failure: any ``Exception`` from the model or a hook moves to FAILED and calls ``on_error``
  on every extension; errors raised while doing so become notes on the original, and the
  original object is re-raised;
- cancellation (``CancelledError`` thrown in by the driver or the task): tool calls left
  without a result are closed with unsuccessful ToolMessages, the phase moves to CANCELLED
  and ``RunCancelledEvent`` is published; ``on_error`` is not called and the same
  ``CancelledError`` is re-raised.

Terminal phases are final (no move out of COMPLETED, FAILED or CANCELLED; docs/runtime.md,
Phases). A consumer that stops listening at RUN_COMPLETED (``break``, ``aclose``) leaves the
request COMPLETED: no RunCancelledEvent. An exception raised by an ``on_event`` listener during
the move into COMPLETED is still a failure (``on_error`` runs, the caller gets it, no
RUN_COMPLETED), but the phase stays COMPLETED: ``on_success`` had already run.

Whatever the ending, the session is released so it accepts a new request: on success right
before RUN_COMPLETED is handed over (nothing runs after it, and a consumer that breaks out
there need not wait for the iterator to be finalized), otherwise in ``finally``.

What extensions call into the request is ``zett_agent._extension_calls``; its endings
other than success, and its release, ``zett_agent._endings``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zett_agent._context import AgentRunContext
from zett_agent._driver import Driver, emission
from zett_agent._endings import Endings
from zett_agent._extension_calls import ExtensionCalls
from zett_agent._hooks import HookTable
from zett_agent._inbox import AnsweredInputs, RequestInbox
from zett_agent._interrupt import was_cut
from zett_agent._members import E, P
from zett_agent._model_call import call_model
from zett_agent._resume import Resumption, resume_point
from zett_agent._tool_turn import ToolTurns
from zett_agent.events import AgentEvent, runtime_event
from zett_agent.exceptions import AgentIterationLimitError, AgentProtocolError
from zett_agent.extensions.events import (
    MessageTiming,
    _appended,
    _moved,
)
from zett_agent.messages import (
    AnyMessage,
    AssistantMessage,
    ToolCall,
    UserMessage,
)
from zett_agent.model import ModelRequest, ModelUsage, runtime_request
from zett_agent.phases import _LEGAL_MOVES, AgentPhase, check_transition

if TYPE_CHECKING:
    from zett_agent.extensions.base import AgentExtension

__all__ = ["Request"]


class _Nothing(tuple):
    """An awaitable that is already done: what an empty hook stage returns.

    An empty tuple whose ``__await__`` is the tuple's own iterator: awaiting it runs no
    Python frame at all. Being empty it is also false, so a hot path tests it before
    awaiting (``if moving := self.move(...)``): even a done awaitable costs about 70 ns
    to await, a truth test a few.
    """

    __slots__ = ()
    __await__ = tuple.__iter__


_NOTHING = _Nothing()


def _model_request(context: AgentRunContext) -> ModelRequest:
    """The model request of the context as it is now (hooks may have changed it)."""
    return runtime_request(
        context.state.messages,
        tuple([tool.definition for tool in context.tools.values()]),
        tuple(context.server_tools.values()),
        context.config.session_id,
    )


async def _clocks() -> tuple[datetime, int]:
    """A move's wall and monotonic time, for a move no listener hears of."""
    return datetime.now(UTC), time.monotonic_ns()


class Request(ToolTurns, ExtensionCalls, Endings):
    """Runs one request (or one compaction pass) of one session."""

    def __init__(
        self,
        *,
        hooks: HookTable,
        max_iterations: int,
        inbox: RequestInbox,
        release: Callable[[Request], None],
        resumption: Resumption | None = None,
        compaction: bool = False,
        steering_interrupts_stream: bool = False,
    ) -> None:
        self.hooks = hooks
        #: A steering message may end a model call early (``zett_agent._interrupt``).
        self.steering_interrupts_stream = steering_interrupts_stream
        self.resumption = resumption
        #: A compaction pass (``Agent.compact``): fixed at construction, so an ``on_message``
        #: that clears ``context.input_message`` fails the request instead of turning it
        #: into a compaction pass.
        self.compaction = compaction
        self.max_iterations = max_iterations
        self.inbox = inbox
        self._release = release
        self.context: AgentRunContext  # set by the Agent right after construction
        self.driver: Driver | None = None  # set by the Agent before the first step
        self._setup = True
        self._unsettled: list[ToolCall] = []
        self._answering = AnsweredInputs()
        self._ended = False
        #: A tool asked to end the request after its batch (``end_after_tools``).
        self._ending = False

    # -- emission and publication ------------------------------------------------------

    def emit(self, event: AgentEvent) -> Awaitable[None]:
        """Stamp the current phase and hand the event to the consumer (await the result)."""
        event.phase = self.context.state.phase
        return emission(event)  # type: ignore[return-value]

    async def _publish_appended(
        self,
        message: AnyMessage,
        timing: MessageTiming | None = None,
        usage: ModelUsage | None = None,
    ) -> None:
        listeners = self.hooks.on_appended
        if not listeners:
            return
        event = _appended(message, timing or MessageTiming.instant(), usage)
        context = self.context
        for extension in listeners:
            await extension.on_event(context, event)

    def flush(self) -> Awaitable[None]:
        """Publish messages extensions added during the stage that just ended."""
        return self._flush() if self.context._unpublished else _NOTHING

    async def _flush(self) -> None:
        context = self.context
        while context._unpublished:
            await self._publish_appended(context._unpublished.pop(0))

    def append(
        self,
        message: AnyMessage,
        timing: MessageTiming | None = None,
        usage: ModelUsage | None = None,
    ) -> Awaitable[None]:
        """Append a message and publish it at once (``timing`` None: an instant message).

        Await the result; with no listener there is nothing to publish and no coroutine.
        """
        state = self.context.state
        state._messages.append(message)
        state._snapshot = None
        if not self.hooks.on_appended:
            return _NOTHING
        return self._publish_appended(message, timing, usage)

    def move(self, target: AgentPhase) -> Awaitable[tuple[datetime, int] | None]:
        """Move to ``target`` (checked) and publish it; await the result if it is true.

        It gives the move's wall and monotonic time, which appended messages' timings are
        built from; None when no extension wants appended messages (nobody would see a
        timing). A move nobody listens to reads no clock and gives ``_NOTHING`` (false).
        """
        state = self.context.state
        previous = state.phase
        if target not in _LEGAL_MOVES[previous]:
            check_transition(previous, target)  # raises, naming the legal moves
        state.phase = target
        hooks = self.hooks
        if not hooks.on_event:
            return _NOTHING  # type: ignore[return-value]
        listeners = hooks.on_move[target]
        if listeners:
            movers = hooks.movers[target]
            if not movers:
                return self._publish_move(previous, target, listeners)
            context = self.context
            for mover in movers:  # heard without an event (``zett_agent._hooks``)
                mover(context, target)
        if hooks.on_appended:
            return _clocks()
        return _NOTHING  # type: ignore[return-value]

    async def _publish_move(
        self,
        previous: AgentPhase,
        target: AgentPhase,
        listeners: tuple[AgentExtension, ...],
    ) -> tuple[datetime, int] | None:
        moved = (datetime.now(UTC), time.monotonic_ns())
        event = _moved(previous, target, *moved)
        context = self.context
        mixed = self.hooks.mixed_moves.get(target)
        if mixed is None:
            for extension in listeners:
                await extension.on_event(context, event)
        else:  # some hear it in ``_on_move`` (``zett_agent._hooks``), in the same order
            for extension, mover in mixed:
                if mover is None:
                    await extension.on_event(context, event)
                else:
                    mover(context, target)
        return moved if self.hooks.on_appended else None

    def stage(
        self, extensions: tuple[AgentExtension, ...], hook: str, *args: Any
    ) -> Awaitable[None]:
        """Run one hook on every participating extension, then publish added messages.

        A stage nobody takes part in (the common case) costs no coroutine; the hot paths
        test the stage before calling, so it costs them no call either.
        """
        return self._run_stage(extensions, hook, args) if extensions else _NOTHING

    async def _run_stage(
        self, extensions: tuple[AgentExtension, ...], hook: str, args: tuple[Any, ...]
    ) -> None:
        context = self.context
        for extension in extensions:
            await getattr(extension, hook)(context, *args)
        await self._stage_ended()

    async def _stage_ended(self) -> None:
        """Publish what the stage added; end a compaction it announced but never completed."""
        context = self.context
        if context.state.phase is P.COMPACTING:
            await self.move(P.READY)
        if context._unpublished and not self._setup:
            await self.flush()

    # -- the request -------------------------------------------------------------------

    async def execute(self) -> None:
        """The whole request (a new input, a resume, or a compaction pass); driven by ``Driver``.

        A new input's steps are written out here rather than in a method of their own: every
        event of the request passes up through this frame, and one frame fewer is felt.
        """
        try:
            if loading := self._load_context():
                await loading
            if self.resumption is not None:
                await self._resume()
            elif self.compaction:
                await self._compaction_pass()
            else:
                message = self.context.input_message
                if not isinstance(message, UserMessage):
                    # Nothing was published or appended yet: the failure stores nothing.
                    raise AgentProtocolError(
                        f"Request setup must produce a UserMessage (on_message left "
                        f"context.input_message as {type(message).__name__})"
                    )
                if self.context._unpublished:
                    await self._flush()
                if moving := self.move(P.READY):
                    await moving
                if publishing := self.append(message):
                    await publishing
                if self.hooks.before_run:
                    await self.stage(self.hooks.before_run, "before_run")
                await self._finish(await self._turns())
        except asyncio.CancelledError as cancel:
            await self._cancelled(cancel)
            raise
        except Exception as error:
            await self._failed(error)
            raise
        finally:
            self._end()

    async def _resume(self) -> None:
        """Continue the restored history: run its open calls, then the usual turns."""
        assert self.resumption is not None
        point = resume_point(self.context.state.messages)
        self.resumption.assign(self.hooks.extensions, point.open_calls)
        # The open calls are in the context: from here on, cancellation closes them.
        self._unsettled = list(point.open_calls)
        await self.flush()
        await self.move(P.READY)
        if self.hooks.before_run:
            await self.stage(self.hooks.before_run, "before_run")
        await self._finish(await self._turns(resumed=point.message))

    async def _compaction_pass(self) -> None:
        """Restore context, run ``on_compact``, append nothing, call no primary model."""
        await self.flush()
        await self.move(P.READY)
        if self.hooks.on_compact:
            await self.stage(self.hooks.on_compact, "on_compact")
        await self.move(P.COMPLETED)

    def _load_context(self) -> Awaitable[None]:
        """Move into LOADING_CONTEXT and run the setup stages (await the result if it is
        true); with no listener and no stage there is nothing to await and no coroutine."""
        hooks = self.hooks
        moving = self.move(P.LOADING_CONTEXT)
        if moving or hooks.on_tool or hooks.on_state or hooks.on_message:
            return self._setup_stages(moving)
        self._setup = False
        return _NOTHING

    async def _setup_stages(self, moving: Awaitable[Any]) -> None:
        hooks = self.hooks
        if moving:
            await moving
        if hooks.on_tool:
            await self.stage(hooks.on_tool, "on_tool")
        if hooks.on_state:
            await self.stage(hooks.on_state, "on_state")
        if hooks.on_message and self.resumption is None and not self.compaction:
            await self.stage(hooks.on_message, "on_message")
        self._setup = False

    async def _turns(self, resumed: AssistantMessage | None = None) -> AssistantMessage:
        """Run turns until a final answer nobody superseded; return that answer.

        ``resumed``: a restored message whose open calls (``_unsettled``) run first, as
        the tool phase of its turn.
        """
        hooks = self.hooks
        context = self.context
        session_id = context.config.session_id
        state = context.state
        if resumed is not None:
            await self._tool_phase(resumed)
            if self._ending:
                await self._complete_active(resumed)
                return resumed
        calls_for_input = 0
        while True:
            calls_for_input += 1
            if calls_for_input > self.max_iterations:
                raise AgentIterationLimitError(
                    f"One input needed more than max_iterations={self.max_iterations} model calls"
                )
            if hooks.before_turn:
                await self.stage(hooks.before_turn, "before_turn")
            if hooks.before_model:
                request = await self._prepare_model_request()
            else:
                request = _model_request(context)
            response, timing = await call_model(self, request)
            message = response.message
            runs_tools = bool(message.tool_calls) and response.stop is None
            if runs_tools:
                # From the moment the answer is in the context, cancellation closes its calls.
                self._unsettled = list(message.tool_calls)
            cut = self.steering_interrupts_stream and was_cut(response)
            if not cut or message.content or message.reasoning:
                # A call cut short before it said anything leaves nothing to keep.
                publishing = self.append(message, timing, response.usage)
                if publishing:
                    await publishing
            if hooks.after_model:
                await self.stage(hooks.after_model, "after_model", response)
            if response.stop is not None:
                await self.emit(
                    AgentEvent(
                        E.MODEL_STOPPED,
                        session_id,
                        stop=response.stop,
                        response=response,
                        message=message,
                    )
                )
            else:
                await emission(
                    runtime_event(
                        E.MODEL_COMPLETED, session_id, response=response, phase=state.phase
                    )
                )

            if runs_tools:
                if await self._tool_phase(message):
                    calls_for_input = 0
                if self._ending:  # a tool handed the turn over: no further model call
                    await self._complete_active(message)
                    return message
                continue

            # A final answer: answer pending steering / internal messages before ending.
            # A call a steer cut short is no answer: only that steering is taken.
            queued = self.inbox.take_steering() if cut else self.inbox.take_final()
            if queued is None:
                if self._answering.steering or self._answering.internal:
                    await self._complete_active(message)
                if hooks.after_turn:
                    await self.stage(hooks.after_turn, "after_turn", message)
                return message
            if isinstance(queued, list):
                await self._start_steering(queued)
            else:
                await self._complete_active(message)
                self._answering.internal = queued
                await self.append(queued)
                await self.emit(
                    AgentEvent(E.INTERNAL_MESSAGE_STARTED, session_id, internal_message=queued)
                )
            if hooks.after_turn:
                await self.stage(hooks.after_turn, "after_turn", message)
            calls_for_input = 0

    async def _prepare_model_request(self) -> ModelRequest:
        hooks = self.hooks
        request = _model_request(self.context)
        for extension in hooks.before_model:
            await extension.before_model(self.context, request)
            await self._stage_ended()
            request = _model_request(self.context)
        return request

    # -- steering and internal messages ------------------------------------------------

    async def _start_steering(self, messages: list[UserMessage]) -> None:
        session_id = self.context.session_id
        for message in messages:
            for event in self._answering.interrupted(session_id):
                await self.emit(event)
            self._answering.steering = message
            await self.append(message)
            await self.emit(AgentEvent(E.STEERING_STARTED, session_id, steering_message=message))

    async def _complete_active(self, answer: AssistantMessage) -> None:
        """A final answer settles the active steering and internal message; ``answer`` is it."""
        for event in self._answering.completed(self.context.session_id, answer):
            await self.emit(event)
