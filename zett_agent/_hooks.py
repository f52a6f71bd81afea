"""Which extensions take part in which hook, computed once per Agent.

An extension that does not override a hook is left out of that hook's tuple, so a stage
with no participant costs one empty loop. A hook counts as overridden when the extension's
class defines it or the instance itself holds one (``extension.after_run = spy``), as long
as that is done before the Agent is built.
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

    __slots__ = ("extensions", *HOOK_NAMES)

    def __init__(self, extensions: Sequence[AgentExtension]) -> None:
        self.extensions = tuple(extensions)
        for name in HOOK_NAMES:
            default = getattr(AgentExtension, name)
            setattr(
                self, name, tuple(ext for ext in self.extensions if _overrides(ext, name, default))
            )


def _overrides(extension: AgentExtension, name: str, default: object) -> bool:
    hook = getattr(extension, name)
    return getattr(hook, "__func__", hook) is not default
