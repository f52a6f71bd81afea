"""``begin_run``'s write-ahead step and its check for runs no ending has settled.

The check is part of the statement that locks the session row (``bump_version`` with
``count_unsettled``), so these tests look at what a refused start leaves behind: nothing.
"""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from agent_app.durable.runs import StaleRuns, begin_run, end_run
from agent_app.durable.sequence import SEQ_BLOCK
from agent_app.durable.store import bump_version
from agent_app.models import ChatMessage, ChatRun, ChatSession, RunStatus

pytestmark = pytest.mark.django_db


def _start(session_id: str, *, refuse_stale: bool = True, content: str = "hello") -> str:
    request_id = str(uuid.uuid4())
    begin_run(session_id, request_id, content=content, worker="w1", refuse_stale=refuse_stale)
    return request_id


def _snapshot(session_id: str) -> tuple:
    session = ChatSession.objects.get(pk=session_id)
    return (
        session.history_version,
        session.seq_reserved,
        ChatRun.objects.filter(session_id=session_id).count(),
        ChatMessage.objects.filter(session_id=session_id).count(),
    )


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.PAUSED])
def test_an_unsettled_run_refuses_the_start_and_nothing_is_stored(status):
    session_id = str(uuid.uuid4())
    request_id = _start(session_id)
    ChatRun.objects.filter(request_id=request_id).update(status=status)
    before = _snapshot(session_id)
    with pytest.raises(StaleRuns):
        _start(session_id, content="second")
    assert _snapshot(session_id) == before


@pytest.mark.parametrize(
    "status",
    [RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.INTERRUPTED],
)
def test_settled_runs_let_the_next_start_through(status):
    session_id = str(uuid.uuid4())
    first = _start(session_id)
    end_run(session_id, first, status, last_seq=3)
    version, reserved, runs, messages = _snapshot(session_id)
    _start(session_id, content="second")
    assert _snapshot(session_id) == (version + 1, reserved + SEQ_BLOCK, runs + 1, messages + 1)


def test_without_the_check_an_unsettled_run_does_not_refuse():
    session_id = str(uuid.uuid4())
    _start(session_id)  # still running
    _start(session_id, refuse_stale=False, content="second")
    assert ChatRun.objects.filter(session_id=session_id, status=RunStatus.RUNNING).count() == 2


def test_a_first_message_stores_the_session_with_the_check_on():
    session_id = str(uuid.uuid4())
    _start(session_id)
    assert _snapshot(session_id)[2:] == (1, 1)


def test_the_count_sees_only_this_sessions_unsettled_runs():
    mine, other = str(uuid.uuid4()), str(uuid.uuid4())
    _start(other)  # running, in another session
    first = _start(mine)
    assert bump_version(mine, timezone.now(), count_unsettled=True).unsettled_runs == 1
    ChatRun.objects.filter(request_id=first).update(status=RunStatus.PAUSED)
    _start(mine, refuse_stale=False)
    assert bump_version(mine, timezone.now(), count_unsettled=True).unsettled_runs == 2
    assert bump_version(mine, timezone.now()).unsettled_runs == 0  # not asked: not counted
