"""Tool calls a crash may cut off: atomic tools commit with their result; the others say
they started.

A tool declared ``@tool(atomic=True)`` (a sync function that writes through the Django
ORM) is run by ``AtomicToolsExtension`` inside one database transaction, in the ORM's
thread, and its result row is inserted in that same transaction. After a crash it is
either done and recorded, or not done at all: a call with no stored result wrote nothing,
so the continuation of its run (``agent_app.durable.continuation``) runs it again, and the
call happens exactly once.

The result row the transaction stores is the one the persistence extension would have
stored when the runtime appended it; the appended message says so (``STORED_ATTRIBUTE``)
and is not inserted twice (only brought up to date when a later layer, such as an
approval's ``after_tool``, added to it: one update, the effect is already committed).
A handler that raises rolls its writes back; the failed result is then stored as any
other. The extension is the innermost layer around a call (highest ``priority``), so an
approval or another layer decides before the transaction opens.

A call of a tool that must not run twice (neither ``idempotent`` nor ``atomic``) is
recorded on its run's row before it starts (``ChatRun.started_call``, one update): if the
worker dies before its result is stored, the continuation closes exactly that call as
"may or may not have completed" (``agent_app.durable.recovery``) and runs the calls after
it, which never started. ``idempotent`` calls cost nothing: they simply run again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from agent_app.durable.persistence import STORED_ATTRIBUTE, shielded
from agent_app.durable.store import RowMeta, bump_version, forget, insert_rows
from agent_app.models import ChatRun, RunStatus
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import ToolCall, ToolMessage
from zett_agent.tools.base import AgentTool, ToolResult, to_tool_result

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext

__all__ = ["STORED_ATTRIBUTE", "AtomicToolsExtension", "mark_started", "run_atomically"]


def result_message(call: ToolCall, result: ToolResult) -> ToolMessage:
    """The stored record of an atomic tool's result, as the runtime would append it."""
    return ToolMessage(
        call.id,
        call.name,
        result.content,
        success=result.success,
        attributes=dict(result.attributes),
    )


def run_atomically(
    tool: AgentTool, arguments: dict[str, Any], session_id: str, request_id: str, call: ToolCall
) -> ToolResult:
    """Run ``tool`` and store its result in one transaction (in the ORM's thread)."""
    try:
        with transaction.atomic():
            result = to_tool_result(tool.handler(**arguments))
            message = result_message(call, result)
            bumped = bump_version(session_id, timezone.now())  # locks the session row
            insert_rows(session_id, request_id, [(message, RowMeta())], after=bumped.last_position)
    finally:
        forget(session_id)  # the history cache learns of the row (or its rollback) anew
    # The stored row's attributes ride along: if a later layer (``after_tool``) changes the
    # result before it is appended, the persistence extension brings the row up to date.
    attributes = {**result.attributes, STORED_ATTRIBUTE: dict(result.attributes)}
    return ToolResult(result.content, success=result.success, attributes=attributes)


def mark_started(request_id: str, call_id: str) -> None:
    """Record that the run starts ``call_id`` (a call that must not run twice)."""
    ChatRun.objects.filter(request_id=request_id, status=RunStatus.RUNNING).update(
        started_call=call_id[:64]
    )


_mark_started = database_sync_to_async(mark_started)


class AtomicToolsExtension(AgentExtension):
    """Runs ``atomic`` tools in a transaction that also stores their result; records the
    start of calls that must not run twice."""

    #: The innermost layer around a tool call.
    priority = 1000

    async def on_tool_call(self, context: AgentRunContext, call: ToolCall, call_next: Any) -> Any:
        tool = context.tools.get(call.name)
        if getattr(tool, "idempotent", False):
            return await call_next()
        if not isinstance(tool, AgentTool) or not tool.atomic:
            await shielded(_mark_started(context.request_id, call.id))
            return await call_next()
        arguments = tool.validate_arguments(call.arguments)
        return await database_sync_to_async(run_atomically)(
            tool, arguments, context.session_id, context.request_id, call
        )
