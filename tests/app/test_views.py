"""The two pages: the session list (which also creates sessions) and the chat page shell."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent_app.models import ChatSession

pytestmark = pytest.mark.django_db


def chat_url(session: ChatSession) -> str:
    return reverse("agent_app:chat", kwargs={"session_id": session.pk})


def test_the_list_page_shows_sessions_with_the_latest_activity_first(client: Client) -> None:
    older = ChatSession.objects.create(title="Older chat")
    newer = ChatSession.objects.create(title="Newer chat")
    now = timezone.now()
    ChatSession.objects.filter(pk=older.pk).update(updated_at=now - timedelta(hours=2))
    ChatSession.objects.filter(pk=newer.pk).update(updated_at=now - timedelta(hours=1))

    response = client.get(reverse("agent_app:session_list"))

    assert response.status_code == 200
    assert list(response.context["sessions"]) == [newer, older]
    page = response.content.decode()
    assert page.index("Newer chat") < page.index("Older chat")
    assert f'href="{chat_url(newer)}"' in page


def test_an_untitled_session_is_listed_as_untitled(client: Client) -> None:
    ChatSession.objects.create()

    response = client.get(reverse("agent_app:session_list"))

    assert "Untitled chat" in response.content.decode()


def test_a_get_of_the_list_page_creates_nothing(client: Client) -> None:
    client.get(reverse("agent_app:session_list"))

    assert ChatSession.objects.count() == 0


def test_posting_to_the_list_page_creates_a_session_and_opens_it(client: Client) -> None:
    response = client.post(reverse("agent_app:session_list"))

    session = ChatSession.objects.get()
    assert session.owner is None
    assert response.status_code == 302
    assert response["Location"] == chat_url(session)


def test_a_signed_in_user_owns_the_sessions_they_create(client: Client) -> None:
    user = get_user_model().objects.create_user("ada", password="pw-for-tests-only")
    client.force_login(user)

    client.post(reverse("agent_app:session_list"))

    assert ChatSession.objects.get().owner == user


def test_creating_a_session_needs_the_csrf_token() -> None:
    client = Client(enforce_csrf_checks=True)

    response = client.post(reverse("agent_app:session_list"))

    assert response.status_code == 403
    assert ChatSession.objects.count() == 0


def test_the_chat_page_hands_its_session_and_socket_path_to_the_script(client: Client) -> None:
    session = ChatSession.objects.create(title="Groceries")

    response = client.get(chat_url(session))

    assert response.status_code == 200
    page = response.content.decode()
    config_json = page.split('<script id="chat-config" type="application/json">')[1]
    config = json.loads(config_json.split("</script>")[0])
    assert config == {
        "sessionId": str(session.pk),
        "title": "Groceries",
        "socketPath": f"/ws/sessions/{session.pk}/",
    }
    assert "<title>Groceries · zett</title>" in page
    assert 'aria-current="page"' in page


def test_the_chat_page_of_an_unknown_session_is_not_found(client: Client) -> None:
    response = client.get(reverse("agent_app:chat", kwargs={"session_id": uuid.uuid4()}))

    assert response.status_code == 404
    assert ChatSession.objects.count() == 0


def test_a_session_owned_by_someone_else_is_not_found_and_not_listed(client: Client) -> None:
    owner = get_user_model().objects.create_user("grace", password="pw-for-tests-only")
    private = ChatSession.objects.create(title="Private plans", owner=owner)
    ChatSession.objects.create(title="Shared chat")

    listing = client.get(reverse("agent_app:session_list")).content.decode()
    response = client.get(chat_url(private))

    assert "Private plans" not in listing
    assert "Shared chat" in listing
    assert response.status_code == 404


def test_a_signed_in_user_sees_their_own_and_unowned_sessions(client: Client) -> None:
    user = get_user_model().objects.create_user("ada", password="pw-for-tests-only")
    other = get_user_model().objects.create_user("grace", password="pw-for-tests-only")
    mine = ChatSession.objects.create(title="Mine", owner=user)
    shared = ChatSession.objects.create(title="Shared")
    ChatSession.objects.create(title="Theirs", owner=other)
    client.force_login(user)

    response = client.get(reverse("agent_app:session_list"))

    assert set(response.context["sessions"]) == {mine, shared}
    assert client.get(chat_url(mine)).status_code == 200


def test_the_chat_page_only_answers_get(client: Client) -> None:
    session = ChatSession.objects.create()

    assert client.post(chat_url(session)).status_code == 405
