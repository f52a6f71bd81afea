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
    assert leaves == [("agent_app", "0018_run_attempts")]
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
