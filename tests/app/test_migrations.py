"""The migrations: chats stored before assistants get the default, and the merged history
ends where the models are."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("agent_app", "0002_round2_runs_waits_ownership")
AFTER = ("agent_app", "0003_chat_assistant")


def test_existing_chats_get_the_default_assistant():
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps.get_model("agent_app", "ChatSession")
    chat = old.objects.create(title="from before")
    executor = MigrationExecutor(connection)
    executor.migrate([AFTER])
    new = executor.loader.project_state([AFTER]).apps.get_model("agent_app", "ChatSession")
    assert new.objects.get(pk=chat.pk).assistant == "demo"
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_migrations_end_with_one_leaf_whose_wait_kinds_are_the_models():
    """Two branches each added a 0009; the merged history is one line, and a wait's kinds
    after it are the model's (no ``elicitation`` kind: an MCP question is an ``ask_user``)."""
    from agent_app.models import WaitKind

    loader = MigrationExecutor(connection).loader
    leaves = [node for node in loader.graph.leaf_nodes() if node[0] == "agent_app"]
    assert len(leaves) == 1, leaves
    state = loader.project_state(leaves[0]).apps.get_model("agent_app", "ReplyWait")
    assert state._meta.get_field("kind").choices == WaitKind.choices
    assert "elicitation" not in WaitKind.values and "browser_tool" in WaitKind.values


def test_the_demo_notes_move_to_the_example_site_with_their_rows():
    """``Note`` left the chat app for the example site (state only): a note written before
    is still there after, read through ``zett_site.Note``; the chat app has no notes."""
    from django.contrib import admin

    from zett_site.models import Note

    before = [("agent_app", "0016_sub_runs"), ("zett_site", None)]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before[0]).apps
    chat = old.get_model("agent_app", "ChatSession").objects.create(title="with a note")
    old.get_model("agent_app", "Note").objects.create(session=chat, title="Milk", text="buy")
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    state = executor.loader.project_state(executor.loader.graph.leaf_nodes()).apps
    with pytest.raises(LookupError):
        state.get_model("agent_app", "Note")
    assert [(n.title, str(n.session_id)) for n in Note.objects.all()] == [("Milk", str(chat.pk))]
    assert not [model for model in admin.site._registry if model._meta.app_label == "agent_app"
                and model._meta.model_name == "note"]  # fmt: skip


def test_superseded_turns_become_earlier_versions_and_nothing_is_lost():
    """A turn answered again, then edited, then a new turn, as stored before versions:
    the turn has three versions, the shown one last, and each old one can be shown."""
    from agent_app.durable.branches import switch_version
    from agent_app.durable.history import snapshot

    before = ("agent_app", "0017_note_to_the_example_site")
    after = ("agent_app", "0018_message_versions")
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    old = executor.loader.project_state([before]).apps
    chat = old.get_model("agent_app", "ChatSession").objects.create(title="old")
    stored = [
        ("user", "q1", False),
        ("assistant", "a1", False),
        ("user", "q2", True),
        ("assistant", "a2", True),
        ("user", "q2", True),  # regenerated …
        ("assistant", "a2 again", True),
        ("user", "q2b", False),  # … then edited
        ("assistant", "a2b", False),
        ("user", "q3", False),
        ("assistant", "a3", False),
    ]
    message = old.get_model("agent_app", "ChatMessage")
    for position, (role, content, superseded) in enumerate(stored):
        message.objects.create(
            session=chat, position=position, role=role, content=content, superseded=superseded
        )
    executor = MigrationExecutor(connection)
    executor.migrate([after])
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    shown = snapshot(str(chat.pk), active_request_id=None)["history"]
    assert [item["content"] for item in shown] == ["q1", "a1", "q2b", "a2b", "q3", "a3"]
    assert [item["position"] for item in shown] == [0, 1, 2, 3, 4, 5]
    assert shown[2]["versions"] == {"index": 3, "count": 3}
    assert "versions" not in shown[0] and "versions" not in shown[4]
    for index, answer in ((1, "a2"), (2, "a2 again")):
        switch_version(str(chat.pk), 2, index, seq=1)
        shown = snapshot(str(chat.pk), active_request_id=None)["history"]
        assert [item["content"] for item in shown] == ["q1", "a1", "q2", answer]
        assert shown[2]["versions"] == {"index": index, "count": 3}
    switch_version(str(chat.pk), 2, 3, seq=2)
    shown = snapshot(str(chat.pk), active_request_id=None)["history"]
    assert [item["content"] for item in shown] == ["q1", "a1", "q2b", "a2b", "q3", "a3"]
