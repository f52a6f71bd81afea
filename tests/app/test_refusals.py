"""Refusals that explain: no New chat that would only be refused, a refusal page with the
reason, anonymous visitors sent to sign in, and a program told which scheme to send."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from agent_app.assistants import Assistant, register, registry
from tests.app.agui_support import make_token

pytestmark = pytest.mark.django_db


class Locked(Assistant):
    id = "locked"
    name = "Locked desk"
    instructions = "You help staff."
    permission_required = "agent_app.view_chatsession"


class Open(Assistant):
    id = "open"
    name = "Open desk"
    instructions = "You help anyone."


@pytest.fixture
def only_locked(settings, monkeypatch):
    """One assistant, which needs a permission plain users lack."""
    monkeypatch.setattr(registry, "_assistants", {})
    register(Locked)
    settings.ZETT_DEFAULT_ASSISTANT = "locked"


@pytest.fixture
def plain(django_user_model):
    user = django_user_model.objects.create_user("plain", password="pw-unused-1")
    client = Client()
    client.force_login(user)
    return client


def test_no_new_chat_when_no_assistant_is_usable(only_locked, plain):
    html = plain.get("/").content.decode()
    assert "new-chat" not in html.replace("new-chat-none", "")
    assert "No assistant is available to your account." in html


def test_a_refused_chat_page_says_why_with_the_overridable_template(only_locked, plain):
    response = plain.get(f"/s/{uuid.uuid4()}/")
    assert response.status_code == 403
    assert response.templates[0].name == "agent_app/forbidden.html"
    html = response.content.decode()
    assert "may not chat with Locked desk" in html
    assert 'href="/"' in html  # back to the chat list


def test_an_anonymous_visitor_is_sent_to_sign_in(only_locked, settings):
    settings.LOGIN_URL = "/accounts/login/"
    session_id = uuid.uuid4()
    response = Client().get(f"/s/{session_id}/")
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next=/s/{session_id}/"


def test_new_chat_names_the_one_usable_assistant_when_it_is_not_the_default(only_locked, plain):
    register(Open)
    html = plain.get("/").content.decode()
    assert "?assistant=open" in html and "New chat" in html


def test_new_chat_is_a_plain_link_to_the_usable_default(only_locked, plain, settings):
    register(Open)
    settings.ZETT_DEFAULT_ASSISTANT = "open"
    html = plain.get("/").content.decode()
    assert "New chat" in html and "?assistant=" not in html


@pytest.mark.parametrize("scheme", ["Token", "Basic"])
def test_another_authorization_scheme_is_told_to_send_bearer(scheme):
    _, secret = async_to_sync(make_token)("ada")
    response = Client().get("/api/chats/", headers={"Authorization": f"{scheme} {secret}"})
    assert response.status_code == 401
    assert "send 'Authorization: Bearer <token>'" in response.json()["message"]
    assert repr(scheme) in response.json()["message"]
    wrong = Client().get("/api/chats/", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "not valid" in wrong.json()["message"]
