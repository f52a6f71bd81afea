"""Starting a run with no socket: what ``POST api/chats/<id>/runs/`` and a schedule do.

The run is started in this process's live session of the chat exactly as a chat page's
``user_message`` starts one (``agent_app.sessions.entry.start_run``: the token budget,
``Busy``, the write-ahead run row), so it is the same durable run: it goes on to its end
with nobody watching, its questions and approvals wait (stored) for an answer from any
socket or AG-UI resume, a cancel reaches it wherever it runs, and any socket that joins
sees it live. The chat is stored first when it is new (owned by the caller, bound to the
assistant, counted in the chats-an-hour quota). While the run is being started the
session counts as joining, so it is not dropped from under it.

Refusals are ``AguiError`` with the HTTP status an API caller gets; a schedule records
their message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from channels.db import database_sync_to_async

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.api.stream import detached
from agent_app.budgets import BudgetExceeded
from agent_app.durable.chat_records import ChatDeleted
from agent_app.durable.runs import Creator
from agent_app.guard.access import (
    Creation,
    Person,
    assistant_refusal,
    chat_quota_message,
    ensure_session,
)
from agent_app.protocol.refusals import Busy
from agent_app.sessions.entry import start_run
from agent_app.sessions.registry import live_sessions

__all__ = ["start_background_run"]

NOT_FOUND_MESSAGE = "There is no chat with this id"
_STATUS = {"unknown_assistant": 400, "forbidden": 403}


async def start_background_run(
    person: Person,
    user: Any,
    session_id: str,
    content: str,
    *,
    assistant: str | None = None,
    attachments: Sequence[str] = (),
) -> str:
    """Start a run of ``session_id`` answering ``content``; its request id.

    ``assistant``: the assistant a new chat talks to (None: the default); ignored for a
    chat already stored, as a ``user_message``'s is.
    """
    code, why = await database_sync_to_async(assistant_refusal)(user, session_id, assistant)
    if code:
        raise AguiError(ErrorCode(code), why, status=_STATUS.get(code, 400))
    match await ensure_session(person, session_id, assistant or ""):
        case Creation.FORBIDDEN | Creation.DELETED:
            raise AguiError(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE, status=404)
        case Creation.QUOTA:
            raise AguiError(ErrorCode.RATE_LIMITED, chat_quota_message(), status=429)
    creator = Creator(person.user_id, person.browser_key or "")
    return await detached(_start(person, session_id, content, creator, list(attachments)))


async def _start(
    person: Person, session_id: str, content: str, creator: Creator, attachments: list[str]
) -> str:
    live = live_sessions().session(session_id)
    live.door.joining += 1  # watched from here: not dropped while the run is stored
    try:
        return await start_run(live, person, content, creator, attachments=attachments)
    except Busy as busy:
        raise AguiError(ErrorCode.BUSY, busy.message, status=409) from None
    except BudgetExceeded as spent:
        resets_at = spent.frame().resets_at
        raise AguiError(
            ErrorCode.BUDGET_EXCEEDED, spent.message, status=429, resets_at=resets_at
        ) from None
    except ChatDeleted:
        raise AguiError(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE, status=404) from None
    finally:
        live.door.joining -= 1
        live.check_idle()
