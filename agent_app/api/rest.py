"""A small JSON API for programs: my chats, a chat's history, cancel a run, delete a chat.

The same rules as the pages and the sockets: only the caller's own chats exist for them
(anyone else's is a 404, ``agent_app.api.common.own_chat``), a chat is deleted with
everything stored for it but not while its answer runs (409, stop it first), and a cancel
reaches the run on whichever worker runs it (``LiveSession.cancel``). Auth is
``agent_app.api.auth``: a token, or the session cookie with CSRF for ``POST`` and
``DELETE``.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.api.common import authorized, chat_id, own_chat, refusal
from agent_app.api.stream import detached
from agent_app.durable.history import page_before
from agent_app.guard.access import Person, visible_sessions
from agent_app.models import ChatRun, ChatSession, RunStatus
from agent_app.protocol.refusals import NotRunning
from agent_app.sessions.registry import live_sessions

__all__ = ["CHATS_PAGE_SIZE", "MAX_HISTORY_LIMIT", "cancel", "chat", "chats", "messages"]

#: Chats a page of ``GET api/chats/`` lists.
CHATS_PAGE_SIZE = 50
#: Most messages one history page may ask for (``?limit=``).
MAX_HISTORY_LIMIT = 100
_NEWEST = 2**62


@csrf_exempt
async def chats(request: HttpRequest) -> HttpResponse:
    """``GET``: the caller's chats, newest activity first, ``CHATS_PAGE_SIZE`` a page."""
    if request.method != "GET":
        return _not_allowed("GET")
    try:
        caller = await authorized(request)
        page = _int_param(request, "page", 1, minimum=1)
        return JsonResponse(await sync_to_async(_chat_page)(caller.person, page))
    except AguiError as error:
        return refusal(error)


def _chat_page(person: Person, number: int) -> dict[str, Any]:
    paginator = Paginator(visible_sessions(person), CHATS_PAGE_SIZE)
    if number > max(1, paginator.num_pages):
        raise AguiError(ErrorCode.NOT_FOUND, f"There is no page {number}", status=404)
    page = paginator.page(number)
    return {
        "chats": [_chat_json(row) for row in page.object_list],
        "page": number,
        "has_next": page.has_next(),
    }


def _chat_json(row: ChatSession) -> dict[str, Any]:
    return {
        "id": str(row.pk),
        "title": row.title,
        "assistant": row.assistant,
        "created_at": _time(row.created_at),
        "updated_at": _time(row.updated_at),
    }


@csrf_exempt
async def chat(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET``: one chat; ``DELETE``: delete it and everything stored for it."""
    if request.method not in ("GET", "DELETE"):
        return _not_allowed("GET, DELETE")
    try:
        caller = await authorized(request)
        row = await own_chat(caller.person, chat_id(session_id))
        if request.method == "GET":
            return JsonResponse(_chat_json(row))
        await sync_to_async(_delete)(row)
        return JsonResponse({"deleted": True})
    except AguiError as error:
        return refusal(error)


def _delete(row: ChatSession) -> None:
    if ChatRun.objects.filter(session=row, status=RunStatus.RUNNING).exists():
        raise AguiError(
            ErrorCode.BUSY,
            "The agent is still answering in this chat; cancel the run first",
            status=409,
        )
    row.delete()


@csrf_exempt
async def messages(request: HttpRequest, session_id: str) -> HttpResponse:
    """``GET``: a page of the chat's stored messages, oldest first (``?before=<position>``:
    those before it; ``?limit=``, at most ``MAX_HISTORY_LIMIT``)."""
    if request.method != "GET":
        return _not_allowed("GET")
    try:
        caller = await authorized(request)
        row = await own_chat(caller.person, chat_id(session_id))
        before = _int_param(request, "before", _NEWEST, minimum=0)
        limit = min(_int_param(request, "limit", 50, minimum=1), MAX_HISTORY_LIMIT)
        page = await sync_to_async(page_before)(str(row.pk), before, limit, active_request_id=None)
        return JsonResponse(page)
    except AguiError as error:
        return refusal(error)


@csrf_exempt
async def cancel(request: HttpRequest, session_id: str) -> HttpResponse:
    """``POST``: cancel the chat's running answer, wherever it runs; 409 if none runs."""
    if request.method != "POST":
        return _not_allowed("POST")
    try:
        caller = await authorized(request)
        row = await own_chat(caller.person, chat_id(session_id))
        try:
            await detached(_cancel(str(row.pk)))
        except NotRunning as refused:
            raise AguiError(ErrorCode.NOT_RUNNING, refused.message, status=409) from None
        return JsonResponse({"cancelled": True})
    except AguiError as error:
        return refusal(error)


async def _cancel(session_id: str) -> None:
    live = live_sessions().session(session_id)
    try:
        await live.cancel()
    finally:
        live.check_idle()


def _int_param(request: HttpRequest, name: str, default: int, *, minimum: int) -> int:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise AguiError(ErrorCode.BAD_INPUT, f"{name} must be an integer >= {minimum}, got {raw!r}")
    return value


def _time(value: Any) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _not_allowed(methods: str) -> HttpResponse:
    response = refusal(AguiError(ErrorCode.BAD_INPUT, f"Use {methods}", status=405))
    response["Allow"] = methods
    return response
