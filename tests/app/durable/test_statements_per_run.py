"""The SQL a run sends, counted: a run's fixed cost is mostly its statements and their
transactions, so a change that adds one shows here (and says why in its own commit).

Counted over the whole run, in every thread (the ORM's calls run in Channels' database
thread): from the ``user_message`` frame sent to its ``run_completed`` frame received,
which comes after the run's end is stored. The chat exists already (a first message also
stores the chat). SQLite, the suite's database: ``BEGIN IMMEDIATE`` is SQLite's opening of a
write transaction (PostgreSQL's ``BEGIN`` is the driver's, sent by no cursor).
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any

import pytest
from django.db import connection
from django.db.backends import utils

from agent_app.models import statements as sql_statements
from tests.app.llm_doubles import call_tool, say
from zett_agent.testing import ScriptedModel

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "sqlite", reason="counts SQLite's statements (its BEGIN IMMEDIATE)"
    ),
]

_TABLE = re.compile(r'^(SELECT\b.*?\bFROM|INSERT INTO|UPDATE|DELETE FROM)\s+"?(\w+)', re.S)


def _shape(sql: str) -> str:
    """``"UPDATE agent_app_chatsession"``: what a statement does, and to which table."""
    sql = sql.strip()
    if sql.startswith(("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK")):
        return sql.split(' "')[0]
    found = _TABLE.match(sql)
    assert found, sql
    return f"{found.group(1).split()[0]} {found.group(2)}"


@pytest.fixture
def statements() -> Any:
    """``with statements() as sent:`` every statement sent meanwhile, in order, as a shape:
    through Django's cursor, or straight to the driver (``statements.run``)."""

    @contextlib.contextmanager
    def counting() -> Any:
        sent: list[str] = []
        lock = threading.Lock()
        execute = utils.CursorWrapper.execute

        def counted(self: Any, sql: str, params: Any = None) -> Any:
            with lock:
                sent.append(_shape(sql))
            return execute(self, sql, params)

        def counted_many(self: Any, sql: str, param_list: Any) -> Any:
            with lock:
                sent.append("many " + _shape(sql))
            return execute_many(self, sql, param_list)

        def counted_send(connection: Any, sql: str, params: Any) -> Any:
            with lock:
                sent.append(_shape(sql))
            return send(connection, sql, params)

        execute_many = utils.CursorWrapper.executemany
        send = sql_statements._send
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(utils.CursorWrapper, "execute", counted)
            patch.setattr(utils.CursorWrapper, "executemany", counted_many)
            patch.setattr(sql_statements, "_send", counted_send)
            yield sent

    return counting


@pytest.fixture(autouse=True)
def _webhooks_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which webhooks listen is read at most once a second per process; here once, by the
    first run, so that a slow machine does not move the read into the counted run."""
    from agent_app.webhooks import events

    events.forget_listeners()
    monkeypatch.setattr(events, "LISTENERS_SECONDS", float("inf"))


async def _chat(sockets: Any, use_model: Any, script: list[Any]) -> Any:
    use_model(ScriptedModel([say("Hello."), *script]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi"})  # stores the chat
    await socket.run_to_completion()
    return socket


async def test_a_plain_run_sends_six_statements_in_two_transactions(sockets, use_model, statements):
    socket = await _chat(sockets, use_model, [say("An answer.")])
    with statements() as sent:
        await socket.send({"type": "user_message", "content": "A question"})
        await socket.run_to_completion()
    assert sent == [
        # The run's start, one transaction (``durable.runs.begin_run``):
        "BEGIN IMMEDIATE",
        # the chat's row locked: its version bumped, a block of seq reserved; returns
        # the shown path's end, whether staff took the chat over, and what the run's
        # top checks: the chat's columns and whether it holds a document
        # (``bump_version``, ``assistants.entry_returning``; an anonymous browser's chat
        # has no owner to read)
        "UPDATE agent_app_chatsession",
        "INSERT agent_app_chatrun",  # the run
        "INSERT agent_app_chatmessage",  # the user's message
        # The run's end, one transaction (``durable.runs.end_run``):
        "BEGIN IMMEDIATE",
        "UPDATE agent_app_chatrun",  # its status, end and usage
        # the chat's version bumped and its last seq and tokens, in one statement
        "UPDATE agent_app_chatsession",
        "INSERT agent_app_chatmessage",  # the answer
    ]
    assert len([shape for shape in sent if not shape.startswith("BEGIN")]) == 6


async def test_a_run_with_one_tool_call_stores_each_step_in_its_own_transaction(
    sockets, use_model, statements
):
    script = [call_tool("calculate", expression="6*7"), say("It is 42.")]
    socket = await _chat(sockets, use_model, script)
    with statements() as sent:
        await socket.send({"type": "user_message", "content": "What is 6*7?"})
        frames = await socket.run_to_completion()
    assert any(frame.get("event", {}).get("type") == "tool_completed" for frame in frames)
    checkpoint = ["BEGIN IMMEDIATE", "UPDATE agent_app_chatsession", "INSERT agent_app_chatmessage"]
    assert sent == [
        # The run's start (one transaction) and top, as in a plain run:
        "BEGIN IMMEDIATE",
        "UPDATE agent_app_chatsession",
        "INSERT agent_app_chatrun",
        "INSERT agent_app_chatmessage",
        # The model's call of the tool, stored before the tool runs (a checkpoint):
        *checkpoint,
        # The tool's result, stored when it is appended (a checkpoint):
        *checkpoint,
        # The run's end with the answer, as a plain run's:
        "BEGIN IMMEDIATE",
        "UPDATE agent_app_chatrun",
        "UPDATE agent_app_chatsession",
        "INSERT agent_app_chatmessage",
    ]
    assert len([shape for shape in sent if not shape.startswith("BEGIN")]) == 10
