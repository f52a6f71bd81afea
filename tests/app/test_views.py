"""The pages: the chat list, the chat page shell, signing in and out (agent_app.views)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent_app.attachments import KNOWN_TYPES
from agent_app.durable.chat_records import record_creation
from agent_app.guard.access import BROWSER_KEY_FIELD
from agent_app.models import ChatMessage, ChatSession

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Hashing a password the production way takes a second: too slow for these tests."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


LIST_URL = reverse("agent_app:session_list")


def chat_url(session_id) -> str:
    return reverse("agent_app:chat", kwargs={"session_id": getattr(session_id, "pk", session_id)})


def browser_key(client: Client) -> str:
    """The anonymous browser id the client got from its first page."""
    client.get(LIST_URL)
    return client.session[BROWSER_KEY_FIELD]


def chat_of(title: str = "", **owner) -> ChatSession:
    """A stored chat with one message (an empty chat is never listed)."""
    session = ChatSession.objects.create(title=title, **owner)
    ChatMessage.objects.create(session=session, position=0, role="user", content=title or "hi")
    return session


def test_the_list_page_shows_the_visitors_chats_with_the_latest_activity_first(client):
    key = browser_key(client)
    older = chat_of("Older chat", browser_key=key)
    newer = chat_of("Newer chat", browser_key=key)
    now = timezone.now()
    ChatSession.objects.filter(pk=older.pk).update(updated_at=now - timedelta(hours=2))
    ChatSession.objects.filter(pk=newer.pk).update(updated_at=now - timedelta(hours=1))

    response = client.get(LIST_URL)

    assert response.status_code == 200
    assert list(response.context["sessions"]) == [newer, older]
    page = response.content.decode()
    assert page.index("Newer chat") < page.index("Older chat")
    assert f'href="{chat_url(newer)}"' in page


def test_an_untitled_chat_is_listed_as_untitled(client):
    chat_of(browser_key=browser_key(client))

    assert "Untitled chat" in client.get(LIST_URL).content.decode()


def test_empty_chats_are_never_listed(client):
    key = browser_key(client)
    ChatSession.objects.create(title="Empty", browser_key=key)

    assert list(client.get(LIST_URL).context["sessions"]) == []


def test_pages_store_no_chat_and_new_chat_is_a_plain_link_to_a_fresh_id(client):
    page = client.get(LIST_URL).content.decode()
    link = re.search(r'<a href="(/s/[0-9a-f-]{36}/)"[^>]*>New chat</a>', page)
    assert link, page
    assert client.get(link.group(1)).status_code == 200
    assert ChatSession.objects.count() == 0
    again = client.get(LIST_URL).content.decode()
    assert link.group(1) not in again  # every page offers an id of its own


def test_the_list_page_only_answers_get(client):
    assert client.post(LIST_URL).status_code == 405
    assert ChatSession.objects.count() == 0


def test_the_chat_page_of_a_new_id_is_an_empty_chat(client):
    session_id = uuid.uuid4()

    response = client.get(chat_url(session_id))

    assert response.status_code == 200
    config = chat_config(response.content.decode())
    assert config == {
        "sessionId": str(session_id),
        "title": "",
        "stored": False,
        "assistant": "demo",
        "handoff": False,
        "socketPath": f"/ws/sessions/{session_id}/",
        "renameUrl": f"/s/{session_id}/rename/",
        "deleteUrl": f"/s/{session_id}/delete/",
        "attachmentsUrl": f"/s/{session_id}/attachments/",
        "listUrl": "/",
        "attachmentLimits": {"maxBytes": 10 * 1024 * 1024, "types": sorted(KNOWN_TYPES)},
    }
    assert "<title>New chat · zett</title>" in response.content.decode()
    assert ChatSession.objects.count() == 0
    assert client.session[BROWSER_KEY_FIELD]  # its socket will carry the browser's cookie


def chat_config(page: str) -> dict:
    config_json = page.split('<script id="chat-config" type="application/json">')[1]
    return json.loads(config_json.split("</script>")[0])


def test_the_chat_page_hands_its_session_and_socket_path_to_the_script(client):
    session = chat_of("Groceries", browser_key=browser_key(client))

    response = client.get(chat_url(session))

    assert response.status_code == 200
    page = response.content.decode()
    assert chat_config(page) == {
        "sessionId": str(session.pk),
        "title": "Groceries",
        "stored": True,
        "assistant": "demo",
        "handoff": False,
        "socketPath": f"/ws/sessions/{session.pk}/",
        "renameUrl": f"/s/{session.pk}/rename/",
        "deleteUrl": f"/s/{session.pk}/delete/",
        "attachmentsUrl": f"/s/{session.pk}/attachments/",
        "listUrl": "/",
        "attachmentLimits": {"maxBytes": 10 * 1024 * 1024, "types": sorted(KNOWN_TYPES)},
    }
    assert "<title>Groceries · zett</title>" in page
    assert 'aria-current="page"' in page


def test_a_chat_of_someone_else_is_not_found_and_not_listed(client):
    owner = get_user_model().objects.create_user("grace", password="pw-for-tests-only")
    private = chat_of("Private plans", owner=owner)
    other_browser = chat_of("Other browser", browser_key="someone-elses-browser")
    orphan = chat_of("Nobody's")  # neither owner nor browser: opens for nobody
    mine = chat_of("Mine", browser_key=browser_key(client))

    listing = client.get(LIST_URL).content.decode()

    assert "Mine" in listing
    for session in (private, other_browser, orphan):
        assert session.title not in listing
        assert client.get(chat_url(session)).status_code == 404
    assert client.get(chat_url(mine)).status_code == 200


def test_a_signed_in_user_sees_only_their_own_chats(client):
    user = get_user_model().objects.create_user("ada", password="pw-for-tests-only")
    other = get_user_model().objects.create_user("grace", password="pw-for-tests-only")
    mine = chat_of("Mine", owner=user)
    chat_of("Anonymous", browser_key="a-browser")
    chat_of("Theirs", owner=other)
    client.force_login(user)

    response = client.get(LIST_URL)

    assert list(response.context["sessions"]) == [mine]
    assert client.get(chat_url(mine)).status_code == 200


def test_signing_in_adopts_the_browsers_chats(client):
    user = get_user_model().objects.create_user("ada", password="pw-for-tests-only")
    key = browser_key(client)
    anonymous = chat_of("Before signing in", browser_key=key)
    stranger = chat_of("Another browser", browser_key="another-browser")

    response = client.post(reverse("login"), {"username": "ada", "password": "pw-for-tests-only"})

    assert response.status_code == 302
    anonymous.refresh_from_db()
    stranger.refresh_from_db()
    assert (anonymous.owner, anonymous.browser_key) == (user, "")
    assert (stranger.owner, stranger.browser_key) == (None, "another-browser")
    assert list(client.get(LIST_URL).context["sessions"]) == [anonymous]


def test_an_ordinary_user_signs_in_and_out_on_the_sites_own_pages(client):
    get_user_model().objects.create_user("ada", password="pw-for-tests-only")
    login_page = client.get(reverse("login"))
    assert login_page.status_code == 200
    assert 'name="username"' in login_page.content.decode()

    wrong = client.post(reverse("login"), {"username": "ada", "password": "nope"})
    assert wrong.status_code == 200 and "_auth_user_id" not in client.session

    signed_in = client.post(
        reverse("login"),
        {"username": "ada", "password": "pw-for-tests-only", "next": LIST_URL},
    )
    assert signed_in.status_code == 302 and signed_in["Location"] == LIST_URL
    assert "Signed in as ada" in client.get(LIST_URL).content.decode()

    assert client.get(reverse("logout")).status_code == 405  # a POST, with CSRF
    signed_out = client.post(reverse("logout"))
    assert signed_out.status_code == 302
    assert "_auth_user_id" not in client.session


def test_signing_out_needs_the_csrf_token():
    user = get_user_model().objects.create_user("ada", password="pw-for-tests-only")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    assert client.post(reverse("logout")).status_code == 403
    assert client.session["_auth_user_id"] == str(user.pk)


def test_with_login_required_anonymous_visitors_are_sent_to_sign_in(client, settings):
    settings.ZETT_REQUIRE_LOGIN = True
    session_id = uuid.uuid4()
    for url in (LIST_URL, chat_url(session_id)):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login") + "?next=")
    user = get_user_model().objects.create_user("ada", password="pw-for-tests-only")
    client.force_login(user)
    assert client.get(chat_url(session_id)).status_code == 200


def test_the_chat_page_only_answers_get(client):
    assert client.post(chat_url(uuid.uuid4())).status_code == 405


def test_a_missing_page_and_a_server_error_look_like_the_site(client, rf):
    from django.views.defaults import server_error

    missing = client.get("/no-such-page/")
    assert missing.status_code == 404
    page = missing.content.decode()
    assert "agent_app/chat.css" in page and "<h1>Not found</h1>" in page
    assert f'href="{LIST_URL}"' in page

    failed = server_error(rf.get("/"))
    assert failed.status_code == 500
    page = failed.content.decode()
    assert "agent_app/chat.css" in page and "<h1>Something went wrong</h1>" in page
    assert "<title>Something went wrong · zett</title>" in page


def test_a_deleted_chats_page_tells_its_owner_it_was_deleted_and_no_one_else(client):
    session = chat_of("Gone soon", browser_key=browser_key(client))
    session_id = session.pk
    record_creation(str(session_id), f"browser:{session.browser_key}")
    session.delete()

    response = client.get(chat_url(session_id))

    assert response.status_code == 410
    assert "This chat was deleted" in response.content.decode()
    assert 'id="composer"' not in response.content.decode()
    stranger = Client().get(chat_url(session_id))
    assert stranger.status_code == 200  # to anyone else: an unknown id, a new empty chat
    assert "This chat was deleted" not in stranger.content.decode()
