"""The Django admin of the chat records renders and searches (agent_app.admin)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_app.models import ChatMessage, ChatRun, ChatSession, ExternalEventRecord
from zett_site.models import Note

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
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def change(obj) -> str:
    meta = obj._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])


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


@pytest.fixture
def regenerated(django_user_model):
    """An anonymous browser's chat: a tool call, an answer in Markdown, then the same
    question answered again (the first answer superseded)."""
    session = ChatSession.objects.create(title="Maths", browser_key="b7e1c0ffee" + "0" * 22)
    rows = [
        ("user", "what is 2 + 2?", {}),
        ("assistant", "", {"tool_calls": [{"id": "c1", "name": "calculate"}]}),
        ("tool", "4", {"name": "calculate", "success": True, "tool_call_id": "c1"}),
        (
            "assistant",
            "It is **4**. <script>alert(1)</script> [x](javascript:alert(1))\n\n"
            "| a | b |\n|---|---|\n| 1 | 2 |",
            {"superseded": True},
        ),
        ("assistant", "Still **four**.", {}),
    ]
    for position, (role, content, extra) in enumerate(rows):
        ChatMessage.objects.create(
            session=session,
            position=position,
            role=role,
            content=content,
            request_id="r" * 36,
            **extra,
        )
    ChatRun.objects.create(session=session, request_id="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    return session


def test_a_session_page_reads_as_the_conversation(staff_client, regenerated):
    page = staff_client.get(change(regenerated)).content.decode()
    # Markdown rendered, raw HTML shown as text, an unsafe link left unlinked.
    assert "<strong>4</strong>" in page and "<strong>four</strong>" in page
    assert "<th>a</th>" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert 'href="javascript:' not in page
    # The replaced answer is marked; the current one is not.
    assert page.count("zett-superseded__tag") == 1
    assert page.index("zett-superseded__tag") < page.index("<strong>4</strong>")
    # Only the tool result has a success mark, and no row shows the "unknown" icon.
    assert "icon-unknown" not in page
    assert page.count("<p>succeeded</p>") == 1
    # Request ids stay on one line (the admin's stylesheet keeps them whole).
    assert "agent_app/admin.css" in page


def test_an_anonymous_owner_is_shown_by_the_short_form_of_its_browser_key(
    staff_client, regenerated
):
    page = staff_client.get(changelist(ChatSession)).content.decode()
    assert "anonymous · b7e1c0ff" in page
    assert "b7e1c0ffee0" not in page
    runs = staff_client.get(changelist(ChatRun)).content.decode()
    assert "agent_app/admin.css" in runs


def test_the_admin_stylesheet_keeps_request_ids_on_one_line(client):
    css = b"".join(client.get("/static/agent_app/admin.css").streaming_content).decode()
    assert "td.field-request_id" in css and "white-space: nowrap" in css


def test_a_session_page_numbers_the_versions_of_a_turn(staff_client):
    """The shown path first, in order, each version of a turn numbered; the other version
    after it, marked."""
    session = ChatSession.objects.create(title="Versions")
    first = ChatMessage.objects.create(
        session=session, position=0, role="user", content="Cats?", superseded=True
    )
    first.versions = 2
    first.save()
    ChatMessage.objects.create(
        session=session, position=1, role="assistant", content="Meow.", superseded=True
    )
    second = ChatMessage.objects.create(session=session, position=0, role="user", content="Dogs?")
    ChatMessage.objects.filter(pk=second.pk).update(version=2, versions=2)
    ChatMessage.objects.create(session=session, position=1, role="assistant", content="Woof.")
    page = staff_client.get(change(session)).content.decode()
    assert page.index("Dogs?") < page.index("Woof.") < page.index("Cats?") < page.index("Meow.")
    assert page.index("2 of 2") < page.index("Dogs?") < page.index("1 of 2") < page.index("Cats?")
    assert page.count("zett-superseded__tag") == 2
