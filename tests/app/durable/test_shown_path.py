"""``shown_path`` (the AG-UI ``MESSAGES_SNAPSHOT``'s history) keeps the items of the rows it
read: what it gives must stay what a whole read of the page gives, whatever changed."""

from __future__ import annotations

import uuid

import pytest

from agent_app.durable.history import SESSION_FRAME_BUDGET, _page, shown_path
from agent_app.durable.runs import begin_run
from agent_app.models import ChatMessage

pytestmark = pytest.mark.django_db


def _whole(session_id: str, before_request: str | None = None) -> list[dict]:
    items, _ = _page(
        session_id,
        before=None,
        limit=50,
        budget=SESSION_FRAME_BUDGET,
        exclude_request=before_request,
    )
    return items


def _turn(session_id: str, text: str, **options) -> str:
    request_id = str(uuid.uuid4())
    begun = begin_run(session_id, request_id, content=text, worker="w1", **options)
    ChatMessage.objects.create(
        session_id=session_id,
        position=begun.position + 1,
        request_id=request_id,
        role="assistant",
        content=f"answer to {text}",
    )
    return request_id


def test_each_read_is_the_whole_page_as_turns_are_added():
    session_id = str(uuid.uuid4())
    for number in range(4):
        request_id = _turn(session_id, f"question {number}")
        assert shown_path(session_id) == _whole(session_id)
        before = shown_path(session_id, before_request=request_id)
        assert before == _whole(session_id, request_id)
        assert [item["content"] for item in before][-1:] == (
            [f"answer to question {number - 1}"] if number else []
        )


def test_a_new_version_of_a_turn_and_a_changed_row_are_read_again():
    session_id = str(uuid.uuid4())
    _turn(session_id, "first")
    _turn(session_id, "second")
    assert shown_path(session_id) == _whole(session_id)
    _turn(session_id, "second, asked again", replace_last_turn=True)
    shown = shown_path(session_id)
    assert shown == _whole(session_id)
    assert "second, asked again" in [item["content"] for item in shown]
    assert "second" not in [item["content"] for item in shown]
    # A row's versions change with its turn's (``agent_app.durable.branches``).
    first = ChatMessage.objects.filter(session_id=session_id).order_by("position").first()
    ChatMessage.objects.filter(pk=first.pk).update(versions=2)
    shown = shown_path(session_id)
    assert shown == _whole(session_id)
    assert shown[0]["versions"] == {"index": 1, "count": 2}


def test_the_page_copies_its_items():
    session_id = str(uuid.uuid4())
    _turn(session_id, "hello")
    shown_path(session_id)[0]["content"] = "changed by a reader"
    assert shown_path(session_id) == _whole(session_id)
