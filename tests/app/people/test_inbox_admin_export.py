"""The staff inbox's permission and lists, the feedback admin, the JSONL export."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client

from agent_app.models import ChatMessage, ChatSession
from agent_app.people import records

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(django_user_model):
    """A customer's chat: a question, a tool call, its result, and a rated answer."""
    owner = django_user_model.objects.create_user("erin", password="unused-pw")
    session = ChatSession.objects.create(title="Refund please", owner=owner, assistant="demo")
    messages = [
        {"role": "user", "content": "Where is my refund?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}],
        },
        {
            "role": "tool",
            "content": "pending",
            "tool_call_id": "c1",
            "name": "lookup",
            "success": True,
        },
        {"role": "assistant", "content": "It is pending."},
    ]
    for position, fields in enumerate(messages):
        ChatMessage.objects.create(session=session, position=position, **fields)
    return session


@pytest.fixture
def staff(django_user_model):
    user = django_user_model.objects.create_user("alice", password="unused-pw", first_name="Alice")
    user.user_permissions.add(Permission.objects.get(codename="staff_chat"))
    client = Client()
    client.force_login(user)
    return client


def _answer(chat) -> ChatMessage:
    return ChatMessage.objects.filter(session=chat, role="assistant").order_by("-position").first()


def test_the_inbox_is_for_staff_only(chat, staff, django_user_model):
    anonymous = Client().get("/inbox/")
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    someone = Client()
    someone.force_login(django_user_model.objects.create_user("bob", password="unused-pw"))
    assert someone.get("/inbox/").status_code == 403
    assert someone.get(f"/inbox/{chat.pk}/").status_code == 403
    assert staff.get("/inbox/").status_code == 200
    assert staff.get(f"/inbox/{chat.pk}/").status_code == 200


def test_the_inbox_lists_what_waits_for_a_person(chat, staff):
    assert staff.get("/inbox/?format=json").json() == {"people": [], "down": [], "waiting": []}
    records.mark_needs_human(str(chat.pk), "Angry about a refund", "customer")
    records.rate(ChatSession.objects.all(), "user:1", None, _answer(chat).pk, "down", "Vague")
    lists = staff.get("/inbox/?format=json").json()
    assert [item["reason"] for item in lists["people"]] == ["Angry about a refund"]
    assert [item["comment"] for item in lists["down"]] == ["Vague"]
    assert staff.get("/inbox/?format=json&show=down").json()["people"] == []
    assert staff.get("/inbox/?format=json&assistant=other").json()["down"] == []
    page = staff.get("/inbox/").content.decode()
    assert "Angry about a refund" in page and f"/inbox/{chat.pk}/" in page


def test_the_feedback_admin_filters_by_assistant_rating_and_date(chat, admin_client):
    records.rate(ChatSession.objects.all(), "user:1", None, _answer(chat).pk, "down", "Vague")
    listing = admin_client.get("/admin/agent_app/chatfeedback/?rating__exact=down&assistant=demo")
    assert listing.status_code == 200 and "Vague" in listing.content.decode()
    assert (
        "Vague"
        not in admin_client.get("/admin/agent_app/chatfeedback/?rating__exact=up").content.decode()
    )
    page = admin_client.get(f"/admin/agent_app/chatsession/{chat.pk}/change/").content.decode()
    assert "takeovers by staff" in page.lower()


def test_zett_export_feedback_writes_the_conversation_up_to_each_rated_answer(chat):
    answer = _answer(chat)
    records.rate(ChatSession.objects.all(), "user:1", None, answer.pk, "up", "Clear")
    out = io.StringIO()
    call_command("zett_export", "--feedback", stdout=out, stderr=io.StringIO())
    (case,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert case["rating"] == "up" and case["comment"] == "Clear"
    assert case["message_id"] == answer.pk and case["answer"]["content"] == "It is pending."
    assert [m["role"] for m in case["conversation"]] == ["user", "assistant", "tool"]
    out = io.StringIO()
    call_command("zett_export", "--feedback", "--rating", "down", stdout=out, stderr=io.StringIO())
    assert out.getvalue() == ""


def test_approvals_waiting_long_are_listed(chat, staff):
    from datetime import timedelta

    from django.utils import timezone

    from agent_app.models import ReplyWait

    wait = ReplyWait.objects.create(
        session=chat,
        request_id="r1",
        tool_call_id="c9",
        tool_name="refund",
        kind="approval",
        event_name="approval_requested",
        response_event="approval_response",
    )
    assert staff.get("/inbox/?format=json").json()["waiting"] == []  # not long yet
    ReplyWait.objects.filter(pk=wait.pk).update(created_at=timezone.now() - timedelta(minutes=6))
    (listed,) = staff.get("/inbox/?format=json").json()["waiting"]
    assert listed["tool"] == "refund" and listed["kind"] == "approval"


@pytest.mark.django_db(transaction=True)  # no test transaction around: only the app's own
def test_the_signals_are_sent_inside_the_recording_transaction(chat):
    from django.db import connection

    from agent_app.people.signals import feedback_saved, handoff_requested

    inside: list[tuple[str, bool]] = []

    def on_handoff(sender, **kwargs):
        inside.append(("handoff", connection.in_atomic_block))

    def on_feedback(sender, **kwargs):
        inside.append(("feedback", connection.in_atomic_block))

    handoff_requested.connect(on_handoff)
    feedback_saved.connect(on_feedback)
    try:
        records.mark_needs_human(str(chat.pk), "help", "customer")
        records.rate(ChatSession.objects.all(), "user:1", None, _answer(chat).pk, "up", "")
    finally:
        handoff_requested.disconnect(on_handoff)
        feedback_saved.disconnect(on_feedback)
    assert [name for name, _ in inside] == ["handoff", "feedback"]
    assert all(atomic for _, atomic in inside)
