"""The pages of the chat app: the chat list, the chat page, and signing in and out.

Nothing here stores a chat. "New chat" is a plain link to a fresh id; the chat page of an
id with no row renders an empty chat, and the chat is stored by its first message over the
socket (``agent_app.access.ensure_session``). So crawlers, prefetching browsers and
mistyped links cannot litter the database, and a GET never writes a chat.

Who sees what is ``agent_app.access``'s business: the list shows the visitor's own chats
that hold a message; a chat that exists and is someone else's is a 404, exactly like one
that does not exist. Rendering a page gives an anonymous browser its id (in the Django
session, so the page's socket carries the cookie that names it). With
``ZETT_REQUIRE_LOGIN`` anonymous visitors are sent to the login page instead.

These views render only the page shell; the conversation itself travels over the
WebSocket (``/ws/sessions/<uuid>/``), which the page script opens.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agent_app.access import may_open, person_of_request, visible_sessions
from agent_app.models import ChatSession

#: How many sessions the list page and the sidebar show, newest activity first.
SESSION_LIST_LIMIT = 50


@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    """List the visitor's chats, with a link that opens a new one."""
    person = person_of_request(request)
    if person is None:
        return redirect_to_login(request.get_full_path())
    return render(
        request,
        "agent_app/session_list.html",
        {
            "sessions": visible_sessions(person)[:SESSION_LIST_LIMIT],
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
    return render(
        request,
        "agent_app/chat.html",
        {
            "session": session,
            "session_id": session_id,
            "unsaved_id": session_id if session is None else None,
            "sessions": visible_sessions(person)[:SESSION_LIST_LIMIT],
            "new_session_id": uuid.uuid4(),
            # Read by chat.js through json_script, so no value is ever spliced into code.
            "chat_config": {
                "sessionId": str(session_id),
                "title": session.title if session is not None else "",
                "socketPath": f"/ws/sessions/{session_id}/",
            },
        },
    )
