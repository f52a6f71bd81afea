"""Atomic tools: a tool's ORM writes and the record of its result commit together.

A tool declared ``@tool(atomic=True)`` (a sync function that writes through the Django
ORM) is run by ``AtomicToolsExtension`` inside one database transaction, in the ORM's
thread, and its result row is inserted in that same transaction. After a crash it is
either done and recorded, or not done at all: a call with no stored result wrote nothing,
so the continuation of its run (``agent_app.durable.continuation``) runs it again, and the
call happens exactly once.

The result row the transaction stores is the one the persistence extension would have
stored when the runtime appended it; the appended message says so (``STORED_ATTRIBUTE``)
and is not written twice. A handler that raises rolls its writes back; the failed result
is then stored as any other. The extension is the innermost layer around a call (highest
``priority``), so an approval or another layer decides before the transaction opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from agent_app.durable.store import RowMeta, bump_version, forget, insert_rows
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import ToolCall, ToolMessage
from zett_agent.tools.base import AgentTool, ToolResult, to_tool_result

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext

__all__ = ["STORED_ATTRIBUTE", "AtomicToolsExtension", "run_atomically"]

#: A result's attribute: its row was stored with the tool's own writes.
STORED_ATTRIBUTE = "stored_with_effects"


def run_atomically(
    tool: AgentTool, arguments: dict[str, Any], session_id: str, request_id: str, call: ToolCall
) -> ToolResult:
    """Run ``tool`` and store its result in one transaction (in the ORM's thread)."""
    try:
        with transaction.atomic():
            result = to_tool_result(tool.handler(**arguments))
            message = ToolMessage(
                call.id,
                call.name,
                result.content,
                success=result.success,
                attributes=dict(result.attributes),
            )
            bumped = bump_version(session_id, timezone.now())  # locks the session row
            insert_rows(session_id, request_id, [(message, RowMeta())], after=bumped.last_position)
    finally:
        forget(session_id)  # the history cache learns of the row (or its rollback) anew
    attributes = {**result.attributes, STORED_ATTRIBUTE: True}
    return ToolResult(result.content, success=result.success, attributes=attributes)


class AtomicToolsExtension(AgentExtension):
    """Runs ``atomic`` tools in a transaction that also stores their result."""

    #: The innermost layer around a tool call.
    priority = 1000

    async def on_tool_call(self, context: AgentRunContext, call: ToolCall, call_next: Any) -> Any:
        tool = context.tools.get(call.name)
        if not isinstance(tool, AgentTool) or not tool.atomic:
            return await call_next()
        arguments = tool.validate_arguments(call.arguments)
        return await database_sync_to_async(run_atomically)(
            tool, arguments, context.session_id, context.request_id, call
        )
