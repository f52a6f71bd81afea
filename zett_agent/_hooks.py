"""Which extensions take part in which hook, computed once per Agent.

An extension that does not override a hook is left out of that hook's tuple, so a stage
with no participant costs one empty loop. A hook counts as overridden when the extension's
class defines it or the instance itself holds one (``extension.after_run = spy``), as long
as that is done before the Agent is built.

A request may leave one extension out of every later hook (``AgentRunContext.withdraw``:
a tracer whose run is not sampled has nothing to do for it): ``without`` gives the table
minus that extension, built once per extension and kept, so withdrawing costs a dict
lookup, and a request nobody listens to builds no events.
"""

from __future__ import annotations

from collections.abc import Sequence

from zett_agent.extensions.base import AgentExtension

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

    __slots__ = ("_without", "extensions", *HOOK_NAMES)

    def __init__(self, extensions: Sequence[AgentExtension]) -> None:
        self.extensions = tuple(extensions)
        self._without: dict[int, HookTable] = {}
        for name in HOOK_NAMES:
            default = getattr(AgentExtension, name)
            setattr(
                self, name, tuple(ext for ext in self.extensions if _overrides(ext, name, default))
            )

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
            self._without[id(extension)] = table
        return table


def _overrides(extension: AgentExtension, name: str, default: object) -> bool:
    hook = getattr(extension, name)
    return getattr(hook, "__func__", hook) is not default
