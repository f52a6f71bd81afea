"""The migration that binds chats to assistants: chats stored before it get the default."""

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
