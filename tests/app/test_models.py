"""The database schema of a chat (agent_app.models)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError

from agent_app.models import ChatMessage, ChatSession, ExternalEventRecord
from zett_agent.messages import MessageRole
from zett_site.models import Note

pytestmark = pytest.mark.django_db


def test_a_session_id_is_a_uuid_and_its_title_falls_back_to_the_id():
    session = ChatSession.objects.create()
    assert len(str(session.pk)) == 36
    assert str(session) == f"Session {str(session.pk)[:8]}"
    session.title = "Trip to Rome"
    assert str(session) == "Trip to Rome"


def test_two_messages_cannot_share_a_position_in_one_session():
    session = ChatSession.objects.create()
    ChatMessage.objects.create(session=session, position=0, role="user", content="a")
    other = ChatSession.objects.create()
    ChatMessage.objects.create(session=other, position=0, role="user", content="b")
    with pytest.raises(IntegrityError):
        ChatMessage.objects.create(session=session, position=0, role="assistant", content="c")


def test_messages_come_back_in_position_order():
    session = ChatSession.objects.create()
    for position in (2, 0, 1):
        ChatMessage.objects.create(session=session, position=position, role="user", content="x")
    assert [m.position for m in session.messages.all()] == [0, 1, 2]


def test_message_roles_are_the_runtime_roles_and_staff():
    choices = {value for value, _ in ChatMessage._meta.get_field("role").choices}
    assert choices == {role.value for role in MessageRole} | {"staff"}


def test_content_holds_text_or_a_list_of_parts():
    session = ChatSession.objects.create()
    parts = [{"type": "text", "text": "look"}, {"type": "image", "source": {"type": "url"}}]
    ChatMessage.objects.create(session=session, position=0, role="user", content=parts)
    assert ChatMessage.objects.get().content == parts


def test_an_external_event_record_is_accepted_when_some_extension_took_it():
    session = ChatSession.objects.create()
    taken = ExternalEventRecord.objects.create(
        session=session, name="approval_response", accepted_by=["ConfirmationExtension"]
    )
    refused = ExternalEventRecord.objects.create(session=session, name="approval_response")
    assert taken.accepted and str(taken) == "approval_response (accepted)"
    assert not refused.accepted and str(refused) == "approval_response (rejected)"


def test_deleting_a_session_deletes_its_messages_and_records_but_keeps_its_notes():
    session = ChatSession.objects.create()
    ChatMessage.objects.create(session=session, position=0, role="user", content="x")
    ExternalEventRecord.objects.create(session=session, name="n")
    note = Note.objects.create(session=session, title="Keep", text="me")
    session.delete()
    assert not ChatMessage.objects.exists() and not ExternalEventRecord.objects.exists()
    note.refresh_from_db()
    assert note.session is None and str(note) == "Keep"
