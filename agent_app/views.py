"""The two pages of the chat app: the session list and the chat page.

A chat session row is created only by a POST from the list page (a GET never writes), so
crawlers, prefetching browsers and mistyped links cannot litter the database with empty
sessions. The chat page answers 404 for an id that has no row this visitor may open.

These views render only the page shell; the conversation itself travels over the
WebSocket (``/ws/sessions/<uuid>/``, SPEC B3), which the page script opens.

Visibility: anonymous visitors see sessions without an owner; a signed-in user sees those
and their own. A session owned by someone else does not exist as far as a visitor can tell.
"""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from agent_app.models import ChatSession

#: How many sessions the list page and the sidebar show, newest activity first.
SESSION_LIST_LIMIT = 50


def visible_sessions(request: HttpRequest) -> QuerySet[ChatSession]:
    """Sessions this visitor may open, newest activity first."""
    visible = Q(owner__isnull=True)
    if request.user.is_authenticated:
        visible |= Q(owner=request.user)
    return ChatSession.objects.filter(visible).order_by("-updated_at", "-created_at")


@require_http_methods(["GET", "POST"])
def session_list(request: HttpRequest) -> HttpResponse:
    """List the visitor's sessions (GET) or start a new one and open it (POST)."""
    if request.method == "POST":
        owner = request.user if request.user.is_authenticated else None
        session = ChatSession.objects.create(owner=owner)
        return redirect("agent_app:chat", session_id=session.pk)
    return render(
        request,
        "agent_app/session_list.html",
        {"sessions": visible_sessions(request)[:SESSION_LIST_LIMIT]},
    )


@require_GET
def chat(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Render the chat page shell for one existing session."""
    session = visible_sessions(request).filter(pk=session_id).first()
    if session is None:
        raise Http404("There is no chat session with this id.")
    return render(
        request,
        "agent_app/chat.html",
        {
            "session": session,
            "sessions": visible_sessions(request)[:SESSION_LIST_LIMIT],
            # Read by chat.js through json_script, so no value is ever spliced into code.
            "chat_config": {
                "sessionId": str(session.pk),
                "title": session.title,
                "socketPath": f"/ws/sessions/{session.pk}/",
            },
        },
    )
