"""The staff pages: ``<prefix>/inbox/`` (live list) and ``<prefix>/inbox/<id>/`` (one chat).

Both need the permission ``agent_app.staff_chat``: a visitor who is not signed in is sent
to the login page, a signed-in one without it gets a 403. The chat page shows the
conversation read-only until its staff member takes it over (``agent_app.people``).
"""

from __future__ import annotations

import uuid

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from agent_app.assistants import registry
from agent_app.models import ChatSession
from agent_app.people.inbox import SHOW, inbox
from agent_app.people.state import is_staff, staff_name
from agent_app.routing import socket_path

__all__ = ["inbox_chat", "inbox_page"]

#: Seconds between two refreshes of the inbox page.
REFRESH_SECONDS = 5


def _staff_only(request: HttpRequest) -> HttpResponse | None:
    """The answer for anyone but staff (None: staff may go on)."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not is_staff(request.user):
        raise PermissionDenied("Only staff (agent_app.staff_chat) may open the inbox")
    return None


@require_GET
def inbox_page(request: HttpRequest) -> HttpResponse:
    """The inbox (HTML), or its lists as JSON (``?format=json``)."""
    if (refused := _staff_only(request)) is not None:
        return refused
    show = request.GET.get("show", "")
    show = show if show in SHOW else ""
    assistant = request.GET.get("assistant", "")[:64]
    lists = inbox(show, assistant)
    if request.GET.get("format") == "json":
        return JsonResponse(lists)
    return render(
        request,
        "agent_app/inbox.html",
        {
            "lists": lists,
            "show": show,
            "assistant": assistant,
            "assistants": registry.all(),
            "inbox_config": {
                "jsonUrl": reverse("agent_app:inbox") + "?format=json",
                "refreshSeconds": REFRESH_SECONDS,
                "show": show,
                "assistant": assistant,
            },
        },
    )


@require_GET
def inbox_chat(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """One chat as staff see it: read-only until they take it over."""
    if (refused := _staff_only(request)) is not None:
        return refused
    session = ChatSession.objects.filter(pk=session_id).first()
    if session is None:
        raise Http404("There is no chat with this id.")
    return render(
        request,
        "agent_app/inbox_chat.html",
        {
            "session": session,
            "staff_config": {
                "sessionId": str(session_id),
                "socketPath": socket_path(session_id),
                "me": staff_name(request.user),
                "inboxUrl": reverse("agent_app:inbox"),
            },
        },
    )
