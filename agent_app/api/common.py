"""What every HTTP API view does first: who calls, their budget, their thread; and how a
refusal is answered (JSON ``{"code", "message"}`` with its status).

A thread (a chat) that exists and is someone else's is a 404, exactly like one that does
not exist (``agent_app.guard.access.may_open``), so ids cannot be probed.
"""

from __future__ import annotations

import uuid

from asgiref.sync import sync_to_async
from django.http import HttpRequest, JsonResponse

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.api.auth import Caller, caller_of
from agent_app.durable.chat_records import was_deleted
from agent_app.guard.access import Person, may_open
from agent_app.guard.limits import limiter
from agent_app.models import ChatSession

__all__ = [
    "NOT_FOUND_MESSAGE",
    "authorized",
    "charge",
    "chat_id",
    "checked_chat",
    "own_chat",
    "own_chat_sync",
    "refusal",
]

NOT_FOUND_MESSAGE = "There is no thread with this id"


def refusal(error: AguiError) -> JsonResponse:
    """The JSON answer of a refused request."""
    response = JsonResponse(error.as_dict(), status=error.status)
    if error.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="zett"'
    return response


async def authorized(request: HttpRequest) -> Caller:
    """The caller, once their request is charged to their budget (``AguiError`` if not)."""
    caller = await sync_to_async(caller_of)(request)
    await charge(caller)
    return caller


async def charge(caller: Caller) -> None:
    """Charge one request to the caller's budget; ``AguiError`` (429) when it is spent."""
    if not await limiter().take_frame(caller.person.key):
        raise AguiError(ErrorCode.RATE_LIMITED, "Too many requests; slow down", status=429)


def chat_id(value: str) -> str:
    """A thread id from a URL, canonical; 404 when it is no UUID (no thread has that id)."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise AguiError(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE, status=404) from None


def own_chat_sync(person: Person, session_id: str, *, missing_ok: bool) -> ChatSession | None:
    """The person's stored chat ``session_id``: 404 for anyone else's, a deleted one, or
    none (``missing_ok``: None for an id never stored, which a new thread may take)."""
    row = ChatSession.objects.filter(pk=session_id).first()
    return checked_chat(person, session_id, row, missing_ok=missing_ok)


def checked_chat(
    person: Person, session_id: str, row: ChatSession | None, *, missing_ok: bool
) -> ChatSession | None:
    """``row``, the stored chat ``session_id`` as read (None: no such row), if the person
    may open it; what ``own_chat_sync`` answers otherwise."""
    if row is None and missing_ok and not was_deleted(session_id):
        return None
    if row is None or not may_open(person, row):
        raise AguiError(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE, status=404)
    return row


async def own_chat(person: Person, session_id: str, *, missing_ok: bool = False) -> ChatSession:
    """``own_chat_sync`` from async code."""
    return await sync_to_async(own_chat_sync)(person, session_id, missing_ok=missing_ok)
