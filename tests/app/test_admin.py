"""The Django admin of the chat records renders and searches (agent_app.admin)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_app.models import ChatMessage, ChatSession, ExternalEventRecord, Note

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("admin", "admin@example.com", "pw-123456")
    client.force_login(user)
    return client


@pytest.fixture
def chat(django_user_model):
    owner = django_user_model.objects.create_user("owner")
    session = ChatSession.objects.create(title="Trip planning", owner=owner)
    ChatMessage.objects.create(session=session, position=1, role="assistant", content="Rome it is")
    ChatMessage.objects.create(session=session, position=0, role="user", content="Paris or Rome?")
    other = ChatSession.objects.create(title="Groceries")
    ChatMessage.objects.create(session=other, position=0, role="user", content="milk")
    ExternalEventRecord.objects.create(
        session=session, name="ask_user_response", accepted_by=["AskUserExtension"]
    )
    ExternalEventRecord.objects.create(session=other, name="approval_response", accepted_by=[])
    Note.objects.create(session=session, title="Packing", text="passport")
    return session, other


def changelist(model) -> str:
    return reverse(f"admin:agent_app_{model._meta.model_name}_changelist")


def change(obj) -> str:
    return reverse(f"admin:agent_app_{obj._meta.model_name}_change", args=[obj.pk])


@pytest.mark.parametrize("model", [ChatSession, ChatMessage, ExternalEventRecord, Note])
def test_every_changelist_and_change_view_renders_for_staff(staff_client, chat, model):
    response = staff_client.get(changelist(model))
    assert response.status_code == 200
    obj = model.objects.first()
    assert staff_client.get(change(obj)).status_code == 200


def test_the_session_list_shows_owner_message_count_and_last_activity(staff_client, chat):
    page = staff_client.get(changelist(ChatSession)).content.decode()
    assert "Trip planning" in page and "owner" in page
    assert 'class="field-message_count">2<' in page
    assert "field-last_activity" in page


def test_a_session_page_shows_its_messages_inline_in_order(staff_client, chat):
    session, _ = chat
    page = staff_client.get(change(session)).content.decode()
    assert page.index("Paris or Rome?") < page.index("Rome it is")


def test_sessions_are_searchable_by_message_content(staff_client, chat):
    page = staff_client.get(changelist(ChatSession), {"q": "milk"}).content.decode()
    assert "Groceries" in page and "Trip planning" not in page


def test_messages_are_searchable_and_filterable_by_role(staff_client, chat):
    found = staff_client.get(changelist(ChatMessage), {"q": "Rome it"}).context["cl"].result_list
    assert [m.content for m in found] == ["Rome it is"]
    users = staff_client.get(changelist(ChatMessage), {"role": "user"}).context["cl"].result_list
    assert {m.role for m in users} == {"user"} and len(users) == 2


def test_external_events_are_filterable_by_verdict_and_session(staff_client, chat):
    session, _ = chat
    accepted = staff_client.get(changelist(ExternalEventRecord), {"verdict": "accepted"})
    assert [r.name for r in accepted.context["cl"].result_list] == ["ask_user_response"]
    rejected = staff_client.get(changelist(ExternalEventRecord), {"verdict": "rejected"})
    assert [r.name for r in rejected.context["cl"].result_list] == ["approval_response"]
    by_session = staff_client.get(
        changelist(ExternalEventRecord), {"session__id__exact": str(session.pk)}
    )
    assert [r.session_id for r in by_session.context["cl"].result_list] == [session.pk]
    assert "accepted by AskUserExtension" in accepted.content.decode()


def test_the_admin_refuses_anonymous_visitors(client, chat):
    response = client.get(changelist(ChatSession))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
