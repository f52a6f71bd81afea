"""The row a POST reads of its thread (``chat_with_waits``) says what the ORM says.

Its statement is plain SQL built once; the ORM query it stands for (the chat annotated
with two ``Exists``) is the reference here, for every kind of wait and run around the
chat: in time or expired, open or answered, running, paused or ended, another chat's.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db.models import Exists, Q
from django.utils import timezone

from agent_app.api.thread_row import chat_with_waits
from agent_app.models import ChatRun, ChatSession, ReplyWait, RunStatus, WaitStatus

pytestmark = pytest.mark.django_db

IN_TIME, PAST = timedelta(hours=1), timedelta(hours=-1)


def orm_row(thread_id: str) -> ChatSession | None:
    """The reference: the chat, annotated by the ORM."""
    waits = ReplyWait.objects.filter(session_id=thread_id, status=WaitStatus.OPEN).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )
    runs = ChatRun.objects.filter(
        session_id=thread_id, status__in=[RunStatus.RUNNING, RunStatus.PAUSED]
    )
    rows = ChatSession.objects.annotate(waiting=Exists(waits), unsettled=Exists(runs))
    return rows.filter(pk=thread_id).first()


def add_wait(chat: ChatSession, status: str, expires_in: timedelta | None) -> None:
    expires_at = None if expires_in is None else timezone.now() + expires_in
    ReplyWait.objects.create(
        session=chat,
        request_id=uuid.uuid4().hex,
        tool_call_id=uuid.uuid4().hex,
        tool_name="ask",
        kind="ask_user",
        event_name="ask",
        response_event="answer",
        status=status,
        expires_at=expires_at,
    )


def add_run(chat: ChatSession, status: str) -> None:
    ChatRun.objects.create(session=chat, request_id=uuid.uuid4().hex, status=status)


def fields(chat: ChatSession) -> dict[str, object]:
    return {f.attname: getattr(chat, f.attname) for f in ChatSession._meta.concrete_fields}


CASES = {
    "nothing": ([], [], False, False),
    "an open question without a deadline": ([("open", None)], [], True, False),
    "an open question in time": ([("open", IN_TIME)], [], True, False),
    "an open question past its deadline": ([("open", PAST)], [], False, False),
    "answered and expired questions": ([("answered", None), ("expired", PAST)], [], False, False),
    "a running run": ([], ["running"], False, True),
    "a paused run and a question": ([("open", IN_TIME)], ["paused"], True, True),
    "ended runs": ([], ["completed", "failed", "interrupted", "cancelled"], False, False),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_row_and_its_two_facts_are_the_orms(case):
    waits, runs, waiting, unsettled = CASES[case]
    chat = ChatSession.objects.create(title="mine", last_event_seq=41)
    other = ChatSession.objects.create(title="another's")
    for status, expires_in in waits:
        add_wait(chat, status, expires_in)
    for status in runs:
        add_run(chat, status)
    add_wait(other, "open", None)  # another chat's rows say nothing of this one
    add_run(other, "running")

    row, reference = chat_with_waits(str(chat.pk)), orm_row(str(chat.pk))
    assert row is not None and reference is not None
    assert (row.waiting, row.unsettled) == (waiting, unsettled)
    assert (reference.waiting, reference.unsettled) == (waiting, unsettled)
    assert fields(row) == fields(reference)
    assert row.last_event_seq == 41 and isinstance(row.pk, uuid.UUID)


def test_no_row_for_an_id_never_stored():
    ChatSession.objects.create(title="another")
    assert chat_with_waits(str(uuid.uuid4())) is None
