"""The pages of the chat app: the chat list, the chat page, and signing in and out.

The other HTTP edges of the app are modules here: ``attachments`` (upload, download) and
``people`` (the staff inbox and a chat's support page).

Nothing here stores a chat. "New chat" is a plain link to a fresh id; the chat page of an
id with no row renders an empty chat, and the chat is stored by its first message over the
socket (``agent_app.guard.access.ensure_session``). So crawlers, prefetching browsers and
mistyped links cannot litter the database, and a GET never writes a chat.

Who sees what is ``agent_app.guard.access``'s business: the list shows the visitor's own chats
that hold a message; a chat that exists and is someone else's is a 404, exactly like one
that does not exist. Rendering a page gives an anonymous browser its id (in the Django
session, so the page's socket carries the cookie that names it). With
``ZETT_REQUIRE_LOGIN`` anonymous visitors are sent to the login page instead.

These views render only the page shell; the conversation itself travels over the
WebSocket (``/ws/sessions/<uuid>/``), which the page script opens.

Managing chats (only the owner, through ``agent_app.guard.access``; anyone else gets a 404):

- the list is paged (``LIST_PAGE_SIZE`` a page, ``?page=``) and searchable (``?q=``: the
  title, or the text of a user message or answer in any version of the conversation; a
  plain ``icontains`` query, so it works the same on SQLite and PostgreSQL). A chat found
  only in a version it does not show links to ``?message=<id>``, and the chat page shows
  that version (the one write a GET makes: the chat's shown path, in one transaction);
- ``rename`` (POST, CSRF-protected) sets the title;
- ``delete`` asks first (GET: a confirmation page), then (POST) deletes the chat and
  everything stored with it: messages (every version), runs, waits and the audit
  rows of the replies (``ExternalEventRecord``). Notes the demo's tool wrote are kept,
  without their chat. A run that waits for its person (a question, an approval) is
  stopped first (``agent_app.sessions.stopping``); a chat whose run is still working is not deleted
  (409): stop it first.

Both actions answer JSON to the page script (``Accept: application/json``) and redirect
otherwise.
"""

from __future__ import annotations

import json
import logging
import uuid

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Case, Exists, OuterRef, Q, QuerySet, Subquery, When
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render, resolve_url
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agent_app import conf
from agent_app.assistants import Assistant, UnknownAssistant, registry
from agent_app.attachments.limits import page_limits
from agent_app.durable.branches import BranchBusy, reveal
from agent_app.durable.chat_records import was_deleted_by
from agent_app.guard.access import Person, may_open, person_of_request, visible_sessions
from agent_app.models import ChatMessage, ChatSession
from agent_app.routing import socket_path
from agent_app.sessions.stopping import (
    is_running,
    stop_waiting_run,
    waits_for_its_person,
    with_waiting_flag,
)

logger = logging.getLogger(__name__)

#: How many chats the sidebar shows, newest activity first.
SESSION_LIST_LIMIT = 50
#: How many chats a page of the list shows.
LIST_PAGE_SIZE = 50
#: Longest search text looked for.
MAX_QUERY_LENGTH = 200
#: Longest title (``ChatSession.title``).
MAX_TITLE_LENGTH = 200


def matching(sessions: QuerySet[ChatSession], query: str) -> QuerySet[ChatSession]:
    """The chats whose title, or a user message or answer in the conversation, holds
    ``query`` (any case).

    Message content is a JSON column, searched as its JSON text: SQLite keeps that text
    ASCII-escaped (``caf\\u00e9``) and both databases escape quotes, so the query is also
    looked for in its JSON-escaped form.
    """
    escaped = json.dumps(query)[1:-1]
    text = Q(content__icontains=query)
    if escaped != query:
        text |= Q(content__icontains=escaped)
    messages = ChatMessage.objects.filter(
        text, session=OuterRef("pk"), role__in=["user", "assistant"]
    )
    # Every version of a turn is searched; a chat found only in a version it does not
    # show opens that version (``found_message``, ``chat``'s ``?message=``).
    hidden = messages.filter(superseded=True).order_by("-pk").values("pk")[:1]
    return sessions.filter(Q(title__icontains=query) | Exists(messages)).annotate(
        found_message=Case(
            When(Exists(messages.filter(superseded=False)), then=None),
            default=Subquery(hidden),
        )
    )


def _url_or_none(target: str | None) -> str | None:
    """A URL, a URL name or a dotted view, resolved; None when there is nothing to link to."""
    if not target:
        return None
    try:
        return resolve_url(target)
    except NoReverseMatch:
        return None


def account_links() -> dict[str, str | None]:
    """Where the pages send people to sign in (``LOGIN_URL``) and out (``ZETT_LOGOUT_URL``)."""
    return {
        "zett_login_url": _url_or_none(settings.LOGIN_URL),
        "zett_logout_url": _url_or_none(conf.ZETT_LOGOUT_URL),
    }


def assistant_context(request: HttpRequest) -> dict[str, object]:
    """The assistants the visitor may start a chat with (New chat offers them when there
    is more than one), and whether pages name a chat's assistant (more than one exists)."""
    return {
        "assistant_choices": registry.for_user(request.user),
        "default_assistant_id": registry.default_id(),
        "show_assistants": len(registry.all()) > 1,
    }


def sidebar_context(person: Person) -> dict[str, object]:
    """The sidebar's chats (the newest), and whether there are more than it shows."""
    sessions = list(visible_sessions(person)[: SESSION_LIST_LIMIT + 1])
    return {
        "sessions": sessions[:SESSION_LIST_LIMIT],
        "more_sessions": len(sessions) > SESSION_LIST_LIMIT,
        "new_session_id": uuid.uuid4(),
    }


def _chosen_assistant(request: HttpRequest, session: ChatSession | None) -> Assistant:
    """A stored chat's assistant; for a new chat the page's ``?assistant=`` or the default
    (a 404 for an id that is not registered; ``PermissionDenied`` with the reason for one
    the visitor may not use)."""
    if session is not None:
        found = registry.get(session.assistant or registry.default_id() or "")
        if found is None:
            raise Http404(str(UnknownAssistant(session.assistant)))
    else:
        found = _new_chats_assistant(request)
    if not found.has_permission(request.user):
        raise PermissionDenied(
            f"Your account may not chat with {found.display_name}. "
            "Ask the site's staff for access, or start a chat with another assistant."
        )
    return found


def _new_chats_assistant(request: HttpRequest) -> Assistant:
    wanted = request.GET.get("assistant", "").strip()
    if wanted:
        found = registry.get(wanted)
        if found is None:
            raise Http404(str(UnknownAssistant(wanted)))
    else:
        try:
            found = registry.resolve(None)
        except UnknownAssistant as unknown:
            raise Http404(str(unknown)) from None
    return found


def refused(request: HttpRequest, reason: str) -> HttpResponse:
    """The refusal page (``agent_app/forbidden.html``, 403) with ``reason``; an anonymous
    visitor is sent to sign in first, since signing in may be all that is missing."""
    login_url = _url_or_none(settings.LOGIN_URL)
    if not request.user.is_authenticated and login_url:
        return redirect_to_login(request.get_full_path())
    context = {"reason": reason, "list_url": reverse("agent_app:session_list")}
    return render(request, "agent_app/forbidden.html", context, status=403)


@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    """The visitor's chats, a page at a time, optionally those matching ``?q=``."""
    person = person_of_request(request)
    if person is None:
        return redirect_to_login(request.get_full_path())
    query = " ".join(request.GET.get("q", "").split())[:MAX_QUERY_LENGTH]
    sessions = with_waiting_flag(visible_sessions(person))
    if query:
        sessions = matching(sessions, query)
    page = Paginator(sessions, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "agent_app/session_list.html",
        {
            **account_links(),
            **assistant_context(request),
            "sessions": page.object_list,
            "page": page,
            "query": query,
            "new_session_id": uuid.uuid4(),
        },
    )


@require_GET
def chat(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Render the chat page shell: a stored chat of the visitor's, or a new empty one."""
    person = person_of_request(request)
    if person is None:
        return redirect_to_login(request.get_full_path())
    session = ChatSession.objects.filter(pk=session_id).first()
    if not may_open(person, session):
        raise Http404("There is no chat session with this id.")
    if session is None and was_deleted_by(str(session_id), person.key):
        # Not a new empty chat: its id is never stored again, so a composer would lie.
        context = {**account_links(), "new_session_id": uuid.uuid4()}
        return render(request, "agent_app/chat_deleted.html", context, status=410)
    try:
        assistant = _chosen_assistant(request, session)
    except PermissionDenied as refusal:
        return refused(request, str(refusal))
    if session is not None and request.GET.get("message", "").isdigit():
        _show_found_version(session, int(request.GET["message"]))
    return render(
        request,
        "agent_app/chat.html",
        {
            **sidebar_context(person),
            **account_links(),
            **assistant_context(request),
            "assistant": assistant,
            "session": session,
            "session_id": session_id,
            "unsaved_id": session_id if session is None else None,
            # Read by chat.js through json_script, so no value is ever spliced into code.
            "chat_config": {
                "sessionId": str(session_id),
                "title": session.title if session is not None else "",
                "stored": session is not None,
                # Sent with the first message; the server binds a new chat to it.
                "assistant": assistant.id,
                # "Talk to a person" (``Assistant.handoff``: people answer this chat too).
                "handoff": assistant.handoff,
                "socketPath": socket_path(session_id),
                "renameUrl": reverse("agent_app:rename", kwargs={"session_id": session_id}),
                "deleteUrl": reverse("agent_app:delete", kwargs={"session_id": session_id}),
                "attachmentsUrl": reverse(
                    "agent_app:attachment_upload", kwargs={"session_id": session_id}
                ),
                "listUrl": reverse("agent_app:session_list"),
                # Checked in the browser before a file is sent (the server checks again).
                "attachmentLimits": page_limits(),
            },
        },
    )


def _show_found_version(session: ChatSession, message_id: int) -> None:
    """A search found ``message_id`` in a version the chat does not show: show it (one
    transaction; while a run goes on the chat opens as it is)."""
    try:
        reveal(str(session.pk), message_id)
    except BranchBusy:
        logger.info("Chat %s runs: its found version %s is not shown", session.pk, message_id)


def _own_chat(request: HttpRequest, session_id: uuid.UUID) -> ChatSession:
    """The visitor's stored chat ``session_id``; a 404 for anyone else, or no such chat."""
    session = ChatSession.objects.filter(pk=session_id).first()
    if session is None or not may_open(person_of_request(request), session):
        raise Http404("There is no chat session with this id.")
    return session


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


@require_POST
def rename(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Give a chat the ``title`` posted (whitespace collapsed; 1 to 200 characters)."""
    session = _own_chat(request, session_id)
    title = " ".join(request.POST.get("title", "").split())
    problem = None
    if not title:
        problem = "A title needs at least one character."
    elif len(title) > MAX_TITLE_LENGTH:
        problem = f"A title may have at most {MAX_TITLE_LENGTH} characters."
    elif "\x00" in title:
        problem = "A title may not hold a NUL character."
    if problem is not None:
        if _wants_json(request):
            return JsonResponse({"error": problem}, status=400)
        return HttpResponse(problem, status=400, content_type="text/plain; charset=utf-8")
    # An update, not save(): renaming is not activity, so the list keeps its order.
    ChatSession.objects.filter(pk=session.pk).update(title=title)
    if _wants_json(request):
        return JsonResponse({"title": title})
    return redirect("agent_app:chat", session_id=session.pk)


@require_http_methods(["GET", "POST"])
def delete(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Ask (GET), then delete (POST) a chat and everything stored with it."""
    session = _own_chat(request, session_id)
    if request.method == "GET":
        context = {"session": session, "waiting": waits_for_its_person(session)}
        return render(request, "agent_app/delete_chat.html", context)
    if waits_for_its_person(session):
        stop_waiting_run(session)  # its open question or approval is closed as cancelled
    if is_running(session):
        problem = "The agent is still answering in this chat. Stop it first, then delete the chat."
        if _wants_json(request):
            return JsonResponse({"error": problem}, status=409)
        return HttpResponse(problem, status=409, content_type="text/plain; charset=utf-8")
    session.delete()
    if _wants_json(request):
        return JsonResponse({"deleted": True, "next": reverse("agent_app:session_list")})
    return redirect("agent_app:session_list")
