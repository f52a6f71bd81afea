"""What a request's context holds of its tools and extensions, as protocols.

Tools and extensions are handed the context (``zett_agent._context``), so their modules
name it in their hints; the context names them back only by these shapes, and the
imports run one way. ``AgentTool`` and ``AgentExtension`` have them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from zett_agent.model import ToolDefinition

__all__ = ["HeldExtension", "HeldTool", "is_held_tool"]


@runtime_checkable
class HeldTool(Protocol):
    """A local tool (``zett_agent.tools.base.AgentTool``)."""

    name: str
    handler: Callable[..., Any]

    @property
    def definition(self) -> ToolDefinition: ...

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]: ...


#: Classes an instance of which passed as a ``HeldTool``. Python 3.11 checks a runtime
#: protocol by gathering its members anew on every ``isinstance`` (about 20 µs), and an
#: extension may register its tools on every request.
_HELD_TOOL_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()


def is_held_tool(value: object) -> bool:
    """``isinstance(value, HeldTool)``, remembered per class once true (a tool's members are
    set by its class's ``__init__``, so one instance answers for the others)."""
    cls = type(value)
    if cls in _HELD_TOOL_CLASSES:
        return True
    if isinstance(value, HeldTool):
        _HELD_TOOL_CLASSES.add(cls)
        return True
    return False


class HeldExtension(Protocol):
    """An extension (``zett_agent.extensions.base.AgentExtension``)."""

    priority: int

    @property
    def name(self) -> str: ...
