"""Managing chats (agent_app.views): rename, delete, search and the paged list.

Only the owner (the signed-in user, or the anonymous browser that created the chat) may
rename, delete or find a chat; anyone else gets a 404, as for a chat that does not exist.
Both actions are CSRF-protected POSTs. The search is a plain ``icontains`` query: the
services run (``test_services``) runs this file again on PostgreSQL. (SQLite folds the
case of ASCII letters only, so "CAFÉ" finds "café" on PostgreSQL alone.)
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent_app.guard.access import BROWSER_KEY_FIELD
from agent_app.models import (
    ChatMessage,
    ChatRun,
    ChatSession,
    ExternalEventRecord,
    ReplyWait,
    RunStatus,
)
from agent_app.views import LIST_PAGE_SIZE, SESSION_LIST_LIMIT
from zett_site.models import Note

pytestmark = pytest.mark.django_db

LIST_URL = reverse("agent_app:session_list")
JSON = {"HTTP_ACCEPT": "application/json"}


def url(name: str, session) -> str:
    return reverse(f"agent_app:{name}", kwargs={"session_id": getattr(session, "pk", session)})


def browser_key(client: Client) -> str:
    client.get(LIST_URL)
    return client.session[BROWSER_KEY_FIELD]


def chat_of(title: str = "", *messages: tuple[str, object], **owner) -> ChatSession:
    """A stored chat with ``messages`` (``(role, content)``; one user message if none)."""
    session = ChatSession.objects.create(title=title, **owner)
    for position, (role, content) in enumerate(messages or [("user", title or "hi")]):
        ChatMessage.objects.create(session=session, position=position, role=role, content=content)
    return session


def titles(response) -> list[str]:
    return [session.title for session in response.context["sessions"]]


# --- rename ------------------------------------------------------------------------------


def test_the_owner_renames_a_chat_and_the_list_keeps_its_order(client):
    key = browser_key(client)
    older = chat_of("Older", browser_key=key)
    newer = chat_of("Newer", browser_key=key)
    earlier = timezone.now() - timedelta(hours=1)
    ChatSession.objects.filter(pk=older.pk).update(updated_at=earlier - timedelta(hours=1))
    ChatSession.objects.filter(pk=newer.pk).update(updated_at=earlier)

    response = client.post(url("rename", older), {"title": "  Trip   to\tLisbon \n"}, **JSON)

    assert response.status_code == 200
    assert response.json() == {"title": "Trip to Lisbon"}
    older.refresh_from_db()
    assert older.title == "Trip to Lisbon"
    assert titles(client.get(LIST_URL)) == ["Newer", "Trip to Lisbon"]


def test_renaming_without_the_page_script_goes_back_to_the_chat(client):
    session = chat_of("Old", browser_key=browser_key(client))

    response = client.post(url("rename", session), {"title": "New"})

    assert response.status_code == 302
    assert response["Location"] == url("chat", session)
    session.refresh_from_db()
    assert session.title == "New"


@pytest.mark.parametrize(
    ("title", "problem"),
    [
        ("   ", "at least one character"),
        ("x" * 201, "at most 200 characters"),
        ("nul\x00here", "NUL"),
    ],
)
def test_a_title_that_cannot_be_stored_is_refused_and_nothing_changes(client, title, problem):
    session = chat_of("Kept", browser_key=browser_key(client))

    response = client.post(url("rename", session), {"title": title}, **JSON)

    assert response.status_code == 400
    assert problem in response.json()["error"]
    session.refresh_from_db()
    assert session.title == "Kept"


def test_only_the_owner_may_rename_a_chat(client):
    user = get_user_model().objects.create_user("grace", password="pw-for-tests-only")
    browser_key(client)
    for session in (
        chat_of("Theirs", owner=user),
        chat_of("Another browser's", browser_key="another-browser"),
    ):
        assert client.post(url("rename", session), {"title": "Mine now"}).status_code == 404
        session.refresh_from_db()
        assert session.title != "Mine now"
    assert client.post(url("rename", uuid.uuid4()), {"title": "x"}).status_code == 404


def test_rename_and_delete_are_csrf_protected_posts():
    client = Client(enforce_csrf_checks=True)
    session = chat_of("Guarded", browser_key=browser_key(client))

    assert client.get(url("rename", session)).status_code == 405
    assert client.post(url("rename", session), {"title": "Forged"}).status_code == 403
    assert client.post(url("delete", session)).status_code == 403
    session.refresh_from_db()
    assert session.title == "Guarded"

    page = client.get(url("chat", session)).content.decode()
    token = re.search(r'<meta name="csrf-token" content="([^"]+)">', page).group(1)
    renamed = client.post(
        url("rename", session), {"title": "Honest"}, HTTP_X_CSRFTOKEN=token, **JSON
    )
    assert renamed.status_code == 200
    deleted = client.post(url("delete", session), HTTP_X_CSRFTOKEN=token, **JSON)
    assert deleted.status_code == 200
    assert not ChatSession.objects.filter(pk=session.pk).exists()


# --- delete ------------------------------------------------------------------------------


def test_delete_asks_first_without_the_page_script(client):
    session = chat_of("Holiday <plans>", browser_key=browser_key(client))

    response = client.get(url("delete", session))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Delete this chat?" in page
    assert "“Holiday &lt;plans&gt;”" in page
    assert f'<form method="post" action="{url("delete", session)}"' in page
    assert ChatSession.objects.filter(pk=session.pk).exists()


def test_delete_removes_the_chat_its_rows_and_audit_but_keeps_its_notes(client):
    session = chat_of(
        "Doomed", ("user", "save a note"), ("assistant", "Saved."), browser_key=browser_key(client)
    )
    ChatMessage.objects.create(
        session=session, position=2, role="user", content="old", superseded=True
    )
    ChatRun.objects.create(session=session, request_id="r1", status=RunStatus.COMPLETED)
    ReplyWait.objects.create(
        session=session, request_id="r1", tool_call_id="c1", kind="approval", status="done"
    )
    ExternalEventRecord.objects.create(session=session, name="approval_response", payload={})
    note = Note.objects.create(session=session, title="Groceries", text="Milk")
    other = chat_of("Survivor", browser_key=browser_key(client))

    response = client.post(url("delete", session))

    assert response.status_code == 302 and response["Location"] == LIST_URL
    assert not ChatSession.objects.filter(pk=session.pk).exists()
    for model in (ChatMessage, ChatRun, ReplyWait, ExternalEventRecord):
        assert not model.objects.filter(session_id=session.pk).exists(), model
    note.refresh_from_db()
    assert note.session is None and note.text == "Milk"
    assert ChatSession.objects.filter(pk=other.pk).exists()
    assert client.get(url("chat", session)).status_code == 410  # its owner is told it is gone
    assert titles(client.get(LIST_URL)) == ["Survivor"]


def test_a_chat_whose_run_is_still_going_is_not_deleted(client):
    session = chat_of("Busy", browser_key=browser_key(client))
    ChatRun.objects.create(session=session, request_id="r1", status=RunStatus.RUNNING)

    response = client.post(url("delete", session), **JSON)

    assert response.status_code == 409
    assert "Stop it first" in response.json()["error"]
    assert ChatSession.objects.filter(pk=session.pk).exists()


def test_only_the_owner_may_delete_a_chat(client):
    user = get_user_model().objects.create_user("grace", password="pw-for-tests-only")
    browser_key(client)
    theirs = chat_of("Theirs", owner=user)

    assert client.get(url("delete", theirs)).status_code == 404
    assert client.post(url("delete", theirs)).status_code == 404
    assert client.post(url("delete", uuid.uuid4())).status_code == 404
    assert ChatSession.objects.filter(pk=theirs.pk).exists()
    client.force_login(user)
    assert client.post(url("delete", theirs), **JSON).json() == {"deleted": True, "next": LIST_URL}


# --- search ------------------------------------------------------------------------------


def test_search_finds_titles_and_the_text_of_messages_and_answers_in_any_case(client):
    key = browser_key(client)
    chat_of("Trip to Lisbon", browser_key=key)
    chat_of(
        "Dinner",
        ("user", "Where do we eat?"),
        ("assistant", "Try the café on the CORNER"),
        browser_key=key,
    )
    chat_of("Quotes", ("user", 'She said "hello" twice'), browser_key=key)
    chat_of(
        "Parts",
        ("user", [{"type": "text", "text": "A list of Parts about tapas"}]),
        browser_key=key,
    )
    chat_of("Unrelated", browser_key=key)

    assert titles(client.get(LIST_URL, {"q": "lisbon"})) == ["Trip to Lisbon"]
    assert titles(client.get(LIST_URL, {"q": "corner"})) == ["Dinner"]
    assert titles(client.get(LIST_URL, {"q": "café"})) == ["Dinner"]
    assert titles(client.get(LIST_URL, {"q": 'said "hello"'})) == ["Quotes"]
    assert titles(client.get(LIST_URL, {"q": "TAPAS"})) == ["Parts"]
    assert titles(client.get(LIST_URL, {"q": "  "})) == [
        "Unrelated",
        "Parts",
        "Quotes",
        "Dinner",
        "Trip to Lisbon",
    ]


def test_search_skips_tool_results_and_other_peoples_chats_and_opens_the_version_found(
    client,
):
    key = browser_key(client)
    chat_of("Tools", ("user", "run it"), ("tool", "secret-word from a tool"), browser_key=key)
    edited = chat_of("Edited", ("user", "first words"), ("assistant", "an answer"), browser_key=key)
    ChatMessage.objects.filter(session=edited).update(superseded=True, versions=2)
    second = ChatMessage.objects.create(session=edited, position=0, role="user", content="second")
    ChatMessage.objects.filter(pk=second.pk).update(version=2, versions=2)
    ChatMessage.objects.filter(session=edited, version=1, role="user").update(chosen=False)
    chat_of("Someone else's", ("user", "first words"), browser_key="another-browser")

    assert titles(client.get(LIST_URL, {"q": "secret-word"})) == []
    assert titles(client.get(LIST_URL, {"q": "second"})) == ["Edited"]
    found = client.get(LIST_URL, {"q": "first words"})
    assert titles(found) == ["Edited"]
    first = ChatMessage.objects.get(session=edited, content="first words")
    link = f"{url('chat', edited)}?message={first.pk}"
    assert link in found.content.decode()
    assert "?message=" not in client.get(LIST_URL, {"q": "second"}).content.decode()

    assert client.get(link).status_code == 200
    shown = ChatMessage.objects.filter(session=edited, superseded=False).order_by("position")
    assert [row.content for row in shown] == ["first words", "an answer"]
    # Someone else's message id changes nothing.
    assert client.get(f"{url('chat', edited)}?message=999999").status_code == 200
    assert [row.content for row in shown] == ["first words", "an answer"]


def test_the_search_is_shown_with_its_results_and_a_search_without_results_says_so(client):
    chat_of("<b>Bold</b> plans", browser_key=browser_key(client))

    found = client.get(LIST_URL, {"q": "<b>"}).content.decode()
    nothing = client.get(LIST_URL, {"q": "zebra <i>"}).content.decode()

    assert 'value="&lt;b&gt;"' in found
    assert "Chats matching “&lt;b&gt;”" in found
    assert "&lt;b&gt;Bold&lt;/b&gt; plans" in found and "<b>Bold" not in found
    assert "No chat matches “zebra &lt;i&gt;”." in nothing


# --- pages -------------------------------------------------------------------------------


def many_chats(key: str, count: int, prefix: str = "Chat") -> None:
    now = timezone.now()
    for number in range(count):
        session = chat_of(f"{prefix} {number:03d}", browser_key=key)
        ChatSession.objects.filter(pk=session.pk).update(updated_at=now - timedelta(minutes=number))


def test_the_list_is_paged_newest_first_and_every_chat_is_reachable(client):
    many_chats(browser_key(client), 2 * LIST_PAGE_SIZE + 5)

    first = client.get(LIST_URL)
    last = client.get(LIST_URL, {"page": 3})

    assert titles(first)[:2] == ["Chat 000", "Chat 001"] and len(titles(first)) == LIST_PAGE_SIZE
    assert titles(last) == [f"Chat {number:03d}" for number in range(100, 105)]
    assert 'rel="next" href="?page=2"' in first.content.decode()
    page = last.content.decode()
    assert 'rel="prev" href="?page=2"' in page and 'rel="next"' not in page
    assert "Page 3 of 3" in page
    assert titles(client.get(LIST_URL, {"page": "999"})) == titles(last)
    seen = {title for n in (1, 2, 3) for title in titles(client.get(LIST_URL, {"page": n}))}
    assert len(seen) == 2 * LIST_PAGE_SIZE + 5


def test_the_pages_of_a_search_keep_the_search(client):
    key = browser_key(client)
    many_chats(key, LIST_PAGE_SIZE + 1, prefix="Soup")
    many_chats(key, 3, prefix="Bread")

    first = client.get(LIST_URL, {"q": "soup"})

    assert len(titles(first)) == LIST_PAGE_SIZE
    assert 'rel="next" href="?q=soup&amp;page=2"' in first.content.decode()
    assert titles(client.get(LIST_URL, {"q": "soup", "page": 2})) == ["Soup 050"]


def test_the_sidebar_shows_the_newest_chats_and_links_to_all_of_them(client):
    key = browser_key(client)
    many_chats(key, SESSION_LIST_LIMIT + 1)

    page = client.get(url("chat", uuid.uuid4())).content.decode()

    assert "Chat 000" in page and f"Chat {SESSION_LIST_LIMIT - 1:03d}" in page
    assert f"Chat {SESSION_LIST_LIMIT:03d}" not in page
    assert f'<a class="session-links__all" href="{LIST_URL}">All chats</a>' in page
