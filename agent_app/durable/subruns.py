"""What outlives a process of a delegate's sub-run: its conversation, its answer, its waits.

A sub-run (``agent_app.agents.subruns``) is another assistant's request that an
``ask_<id>`` call of a chat's run runs. It has no rows in the chat's history: its
conversation is one ``SubRun`` row (per chat and calling tool call), written as each of
its messages is appended, and its questions and approvals are the chat's ordinary
``ReplyWait`` rows (their payload names the sub-run's ``agent`` and
``parent_tool_call_id``).

So when the process dies while a sub-run waits or works, the chat's run is settled like
any run (``agent_app.durable.recovery``): its open ``ask_<id>`` call counts as waiting
while a wait of its sub-runs (at any depth: ``root_tool_call_id``) is open and in time, or
answered; otherwise (the sub-run was streaming or running a tool) the call is left open
for the continuation, as an ``idempotent`` call is. The continuation runs that call again;
it finds the row and goes on with the sub-run from its stored conversation (its
checkpoint), with the replies known meanwhile (``resumption``). Its tool calls keep the
top run's rules: an ``atomic`` tool stores its result in the row in the transaction of
its writes (``run_atomically``), so a call without a stored result wrote nothing and runs
again; a call of a tool that must not run twice is named on the row before it starts
(``mark_started``) and, cut off, is closed as "may or may not have completed", never run
again; an approved call that had not started keeps its approval. A sub-run that had
answered gives that answer without running again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from agent_app.durable.atomic import result_message
from agent_app.durable.waits import LIVE_STATUSES
from agent_app.models import ChatMessage, ReplyWait, SubRun, SubRunStatus, WaitStatus
from zett_agent.messages import (
    AnyMessage,
    AssistantMessage,
    MessageRole,
    ToolCall,
    ToolMessage,
    content_text,
)
from zett_agent.serialization import message_from_dict, message_to_dict
from zett_agent.tools.base import AgentTool, ToolResult, to_tool_result

__all__ = [
    "Opened",
    "finish",
    "live_waits_under",
    "mark_started",
    "open_sub_run",
    "resumption",
    "run_atomically",
    "write_messages",
]

#: The result of a sub-run's call that had started when its process died.
STARTED_TOOL_CONTENT = (
    "Interrupted: the server stopped while this tool was running; it may or may not have completed."
)


@dataclass(frozen=True, slots=True)
class Opened:
    """A sub-run as its ``ask_<id>`` call finds it."""

    pk: int
    #: Its stored conversation (empty for a new one).
    messages: list[AnyMessage]
    #: Its answer when it had finished already (the call gives it without running again).
    answer: str | None
    #: The last call it started of a tool that must not run twice.
    started_call: str = ""


def open_sub_run(
    session_id: str,
    parent_tool_call_id: str,
    *,
    root_tool_call_id: str,
    assistant: str,
    request_id: str,
    depth: int,
) -> Opened:
    """The sub-run of that call: a new row, or the stored one (taken by ``request_id``)."""
    for _ in range(2):
        row = SubRun.objects.filter(
            session_id=session_id, parent_tool_call_id=parent_tool_call_id
        ).first()
        if row is not None and depth == 1 and _answered_since(row):
            _retire(row)  # an earlier call that had this id (another turn or version)
            row = None
        if row is not None:
            if row.status == SubRunStatus.COMPLETED:
                return Opened(row.pk, [], row.answer)
            SubRun.objects.filter(pk=row.pk).update(request_id=request_id)
            messages = [message_from_dict(item) for item in row.messages]
            answer = _final_answer(messages)
            if answer is not None:  # it had answered; the process died before saying so
                finish(row.pk, SubRunStatus.COMPLETED, answer)
            return Opened(row.pk, messages, answer, row.started_call)
        try:
            with transaction.atomic():
                row = SubRun.objects.create(
                    session_id=session_id,
                    parent_tool_call_id=parent_tool_call_id,
                    root_tool_call_id=root_tool_call_id,
                    assistant=assistant,
                    request_id=request_id,
                    depth=depth,
                )
        except IntegrityError:
            continue  # created meanwhile: read it
        return Opened(row.pk, [], None)
    raise RuntimeError(f"Could not open the sub-run of {parent_tool_call_id!r}")


def _answered_since(row: SubRun) -> bool:
    """Whether the chat stored a result for the row's call after the row was made.

    Call ids are the model's, and some models repeat them within a chat (the offline demo
    numbers its calls along the shown path; scripted doubles use fixed ids). A sub-run
    whose call got its result belongs to that earlier call; a call with this id that
    comes after it is a new one. A continuation after a restart finds no result stored
    since its own row was made, so it takes the row up again.
    """
    return ChatMessage.objects.filter(
        session_id=row.session_id,
        role=MessageRole.TOOL.value,
        tool_call_id=row.parent_tool_call_id,
        created_at__gte=row.created_at,
    ).exists()


def _retire(row: SubRun) -> None:
    """Keep an earlier call's sub-run (the admin shows it) under an id no call has."""
    retired = f"{row.parent_tool_call_id[:200]}#retired-{row.pk}"
    SubRun.objects.filter(pk=row.pk).update(parent_tool_call_id=retired)


def _final_answer(messages: list[AnyMessage]) -> str | None:
    """The answer a stored conversation ends with (the process died before the row said
    ``completed``), or None: it has work left."""
    last = messages[-1] if messages else None
    if isinstance(last, AssistantMessage) and not last.tool_calls and len(messages) > 1:
        return content_text(last.content)
    return None


def write_messages(pk: int, messages: list[dict[str, Any]]) -> None:
    """Store a sub-run's whole conversation (as serialized dicts)."""
    SubRun.objects.filter(pk=pk).update(messages=messages)


def finish(pk: int, status: SubRunStatus, answer: str = "") -> None:
    SubRun.objects.filter(pk=pk).update(status=status, answer=answer)


def mark_started(pk: int, call_id: str) -> None:
    """Record that the sub-run starts ``call_id`` (a call that must not run twice)."""
    SubRun.objects.filter(pk=pk).update(started_call=call_id[:255])


def run_atomically(
    tool: AgentTool, arguments: dict[str, Any], pk: int, call: ToolCall
) -> ToolResult:
    """Run an ``atomic`` tool of a sub-run and append its result to the sub-run's stored
    conversation in one transaction (in the ORM's thread): done and recorded, or neither."""
    with transaction.atomic():
        result = to_tool_result(tool.handler(**arguments))
        row = SubRun.objects.select_for_update().only("messages").get(pk=pk)
        message = result_message(call, result)
        SubRun.objects.filter(pk=pk).update(messages=[*row.messages, message_to_dict(message)])
    return result


def open_calls(messages: list[AnyMessage]) -> list[str]:
    """The ids of the calls of the last assistant message that have no result yet."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage):
            if not message.tool_calls:
                return []
            answered = {
                later.tool_call_id
                for later in messages[index + 1 :]
                if isinstance(later, ToolMessage)
            }
            return [call.id for call in message.tool_calls if call.id not in answered]
    return []


def resumption(
    session_id: str, messages: list[AnyMessage], started_call: str = ""
) -> tuple[list[AnyMessage], list[tuple[str, dict[str, Any]]], dict[str, datetime]]:
    """What a stored sub-run needs to go on: its conversation with the call that had
    started closed (at most once; its wait marked done), the known replies to its other
    open calls (an approved call that never started keeps its approval), and the deadlines
    of those still waiting. Open calls with neither run again when the sub-run goes on."""
    open_ids = open_calls(messages)
    if not open_ids:
        return messages, [], {}
    replies: list[tuple[str, dict[str, Any]]] = []
    deadlines: dict[str, datetime] = {}
    started = {started_call} & set(open_ids)
    with transaction.atomic():
        for wait in ReplyWait.objects.select_for_update().filter(
            session_id=session_id, tool_call_id__in=open_ids, status__in=LIVE_STATUSES
        ):
            if wait.status == WaitStatus.EXECUTING and wait.tool_call_id in started:
                wait.status = WaitStatus.DONE
                wait.save(update_fields=["status"])
            elif wait.status == WaitStatus.EXECUTING:
                wait.status = WaitStatus.ANSWERED  # approved; its body never began
                wait.save(update_fields=["status"])
            elif wait.status == WaitStatus.OPEN and wait.expires_at is not None:
                deadlines[wait.tool_call_id] = wait.expires_at
            if wait.status == WaitStatus.ANSWERED and isinstance(wait.reply, dict):
                replies.append((wait.response_event, wait.reply))
    if started:
        last = next(m for m in reversed(messages) if isinstance(m, AssistantMessage))
        messages = messages + [
            ToolMessage(call.id, call.name, STARTED_TOOL_CONTENT, success=False)
            for call in last.tool_calls
            if call.id in started
        ]
    return messages, replies, deadlines


def live_waits_under(session_id: str, call_ids: list[str]) -> dict[str, list[ReplyWait]]:
    """The live waits of the sub-runs of each of the chat's calls ``call_ids`` (at any
    depth), by that call's id; locked for the caller's transaction."""
    if not call_ids:
        return {}
    roots = dict(
        SubRun.objects.filter(session_id=session_id, root_tool_call_id__in=call_ids).values_list(
            "parent_tool_call_id", "root_tool_call_id"
        )
    )
    if not roots:
        return {}
    found: dict[str, list[ReplyWait]] = {}
    for wait in ReplyWait.objects.select_for_update().filter(
        session_id=session_id, status__in=LIVE_STATUSES
    ):
        parent = (wait.payload or {}).get("parent_tool_call_id")
        if parent in roots:
            found.setdefault(roots[parent], []).append(wait)
    return found


def has_sub_run(session_id: str, call_id: str) -> bool:
    """Whether that call of the chat's run had started a sub-run."""
    return SubRun.objects.filter(session_id=session_id, parent_tool_call_id=call_id).exists()


def to_dicts(messages: list[AnyMessage]) -> list[dict[str, Any]]:
    return [message_to_dict(message) for message in messages]
