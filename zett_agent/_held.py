"""What a request's context holds of its tools and extensions, as protocols.

Tools and extensions are handed the context (``zett_agent._context``), so their modules
name it in their hints; the context names them back only by these shapes, and the
imports run one way. ``AgentTool`` and ``AgentExtension`` have them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from zett_agent.model import ToolDefinition

__all__ = ["HeldExtension", "HeldTool"]


@runtime_checkable
class HeldTool(Protocol):
    """A local tool (``zett_agent.tools.base.AgentTool``)."""

    name: str
    handler: Callable[..., Any]

    @property
    def definition(self) -> ToolDefinition: ...

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]: ...


class HeldExtension(Protocol):
    """An extension (``zett_agent.extensions.base.AgentExtension``)."""

    priority: int

    @property
    def name(self) -> str: ...
