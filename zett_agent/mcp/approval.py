"""Approval by annotations: which MCP tool calls need the person's approval.

A tool needs approval unless the server annotated it ``readOnlyHint: true`` without
``destructiveHint: true``, or the configuration exempts it (``no_approval``, by its own name
or its zett name). The ``MCPServer`` records an ``MCPToolInfo`` per listed tool and answers
``needs_approval(name)``; ``ApprovalNames`` is the same answer as a live set, for an
approval gate that asks ``call.name in names``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

__all__ = ["ApprovalNames", "MCPToolInfo", "annotations_need_approval"]


def annotations_need_approval(
    names: Collection[str], annotations: dict[str, Any], no_approval: Collection[str]
) -> bool:
    """Whether a tool known by ``names`` (own and zett name) with ``annotations`` needs it."""
    if any(name in no_approval for name in names):
        return False
    return annotations.get("readOnlyHint") is not True or annotations.get("destructiveHint") is True


@dataclass(frozen=True, slots=True)
class MCPToolInfo:
    """What zett knows about one listed tool: names, annotations and approval."""

    server: str
    name: str
    zett_name: str
    annotations: dict[str, Any]
    needs_approval: bool


class ApprovalNames(AbstractSet[str]):
    """A live set of this server's zett tool names whose calls need approval.

    ``name in server.approval_names`` is ``server.needs_approval(name)`` for names of this
    server (``<server>__...``) and False for any other; iterating gives the listed tools
    that need approval. It follows every new listing, so an approval gate that keeps it
    (rather than a copy) always asks about the tools the server lists now.
    """

    __slots__ = ("_listed", "_needs_approval", "_prefix")

    def __init__(
        self,
        server_name: str,
        needs_approval: Callable[[str], bool],
        listed: Mapping[str, MCPToolInfo],
    ) -> None:
        """``listed`` is the server's own (growing) map of zett name to tool info."""
        self._prefix = f"{server_name}__"
        self._needs_approval = needs_approval
        self._listed = listed

    def __contains__(self, name: object) -> bool:
        return (
            isinstance(name, str) and name.startswith(self._prefix) and self._needs_approval(name)
        )

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, info in self._listed.items() if info.needs_approval])

    def __len__(self) -> int:
        return sum(1 for info in self._listed.values() if info.needs_approval)
