"""Which extensions take part in which hook, computed once per Agent.

An extension that does not override a hook is left out of that hook's tuple, so a stage
with no participant costs one empty loop. A hook counts as overridden when the extension's
class defines it or the instance itself holds one (``extension.after_run = spy``), as long
as that is done before the Agent is built.

A request may leave one extension out of every later hook (``AgentRunContext.withdraw``:
a tracer whose run is not sampled has nothing to do for it): ``without`` gives the table
minus that extension, built once per extension and kept, so withdrawing costs a dict
lookup, and a request nobody listens to builds no events. An extension may also be left
out from the request's start: one with a ``_takes_part(context)`` method (``gated``) is
asked once, when the request is claimed, and answering False withdraws it before any event.

An ``on_event`` listener may ask for fewer events than all (runtime-internal, read once per
Agent): ``_phase_events``, the phases whose moves into it it wants (default: every phase),
and ``_message_events`` False, no ``MessageAppendedEvent`` (default True). Events another
extension publishes, and ``RunCancelledEvent``, still reach every listener. A move or an
append nobody asked for builds no event, and a move is timed only while someone wants the
appended messages' timings.

A listener may also hear the moves it asked for without any event (runtime-internal too):
``_on_move(context, phase)``, a plain function the runtime calls right where the phase
moves, instead of building a ``PhaseTransitionEvent`` and awaiting ``on_event`` with it
(a tracer, which only reads the phase, so costs no event, clock or coroutine per move). It
is used only while the extension's ``on_event`` is the one written beside ``_on_move`` (a
subclass or an instance that overrides ``on_event`` hears its moves there). A move every
listener of which has one builds no event; otherwise the event is built for the others,
and every listener is called in priority order as always, each the way it hears moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from zett_agent.extensions.base import AgentExtension
from zett_agent.phases import AgentPhase

__all__ = ["HOOK_NAMES", "HookTable"]

HOOK_NAMES = (
    "on_tool",
    "on_state",
    "on_message",
    "before_run",
    "before_turn",
    "before_model",
    "on_model_request",
    "after_model",
    "before_tool",
    "on_tool_call",
    "after_tool",
    "after_turn",
    "after_run",
    "on_success",
    "on_error",
    "on_event",
    "on_compact",
)


class HookTable:
    """For each hook name, the overriding extensions in priority order."""

    __slots__ = (
        "_without",
        "completes_quietly",
        "extensions",
        "gated",
        "mixed_moves",
        "movers",
        "on_appended",
        "on_move",
        *HOOK_NAMES,
    )

    #: The ``on_event`` listeners of each phase move (by the phase moved into), and of
    #: appended messages; the extensions asked whether they take part in a request.
    on_move: dict[AgentPhase, tuple[AgentExtension, ...]]
    #: Of each phase move: its listeners' ``_on_move`` functions when every one has one,
    #: else an empty tuple (the move builds its event).
    movers: dict[AgentPhase, tuple[Callable[[Any, AgentPhase], None], ...]]
    #: Of each phase move that builds its event while some listener has ``_on_move``: each
    #: listener with its ``_on_move`` or None (which gets the event); absent otherwise.
    mixed_moves: dict[AgentPhase, tuple[tuple[AgentExtension, Any], ...]]
    on_appended: tuple[AgentExtension, ...]
    gated: tuple[AgentExtension, ...]

    def __init__(self, extensions: Sequence[AgentExtension]) -> None:
        self.extensions = tuple(extensions)
        self._without: dict[int, HookTable] = {}
        for name in HOOK_NAMES:
            default = getattr(AgentExtension, name)
            setattr(
                self, name, tuple(ext for ext in self.extensions if _overrides(ext, name, default))
            )
        self.gated = tuple(ext for ext in self.extensions if hasattr(ext, "_takes_part"))
        self._listeners()

    def without(self, extension: AgentExtension) -> HookTable:
        """This table with ``extension`` in no hook (``extensions`` keeps every one: a
        withdrawn extension is still registered, ``publish(target=...)`` still finds it)."""
        table = self._without.get(id(extension))
        if table is None:
            table = object.__new__(HookTable)
            table.extensions = self.extensions
            table._without = {}
            for name in HOOK_NAMES:
                setattr(table, name, tuple(e for e in getattr(self, name) if e is not extension))
            table.gated = tuple(e for e in self.gated if e is not extension)
            table._listeners()
            self._without[id(extension)] = table
        return table

    def _listeners(self) -> None:
        """``on_move`` and ``on_appended`` from ``on_event`` and what each listener asks."""
        self.on_move = {
            phase: tuple(e for e in self.on_event if phase in _phases(e)) for phase in AgentPhase
        }
        self.on_appended = tuple(
            e for e in self.on_event if getattr(e, "_message_events", True) is not False
        )
        self.movers = {}
        self.mixed_moves = {}
        for phase, listeners in self.on_move.items():
            movers = tuple(_mover(e) for e in listeners)
            if None not in movers:
                self.movers[phase] = movers  # type: ignore[assignment]
                continue
            self.movers[phase] = ()
            if any(movers):
                self.mixed_moves[phase] = tuple(zip(listeners, movers, strict=True))
        completed = AgentPhase.COMPLETED
        #: Whether the move into COMPLETED leaves nothing to await: no listener hears it
        #: but through ``_on_move``, and none wants appended messages (their timings).
        self.completes_quietly = not self.on_appended and (
            not self.on_move[completed] or bool(self.movers[completed])
        )


def _phases(extension: AgentExtension) -> frozenset[AgentPhase] | tuple[AgentPhase, ...]:
    """The phases whose moves ``extension`` wants to hear of (every one by default)."""
    wanted = getattr(extension, "_phase_events", None)
    return tuple(AgentPhase) if wanted is None else frozenset(wanted)


def _mover(extension: AgentExtension) -> Callable[[Any, AgentPhase], None] | None:
    """``extension._on_move``, where moves may reach it instead of ``on_event``: only while
    ``on_event`` is the one of the class that wrote ``_on_move`` (see the module)."""
    if "on_event" in vars(extension):
        return None
    for klass in type(extension).__mro__:
        if "_on_move" in vars(klass):
            if type(extension).on_event is not klass.on_event:
                return None  # overridden below the class that wrote ``_on_move``
            return extension._on_move  # type: ignore[attr-defined]
    return None


def _overrides(extension: AgentExtension, name: str, default: object) -> bool:
    hook = getattr(extension, name)
    return getattr(hook, "__func__", hook) is not default
