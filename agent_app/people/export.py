"""Rated answers as evaluation cases: one JSON object a line (``manage.py zett_export``).

Each case is the conversation as the model saw it up to the rated answer (the chat's
shown messages before it, tool calls and results included; staff messages with the role
``staff``), the answer, the rating and the comment.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from agent_app.durable.history import history_item
from agent_app.durable.support import iso
from agent_app.models import ChatFeedback, ChatMessage

__all__ = ["feedback_cases"]

_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "staff")


def _message(item: dict[str, Any]) -> dict[str, Any]:
    return {key: item[key] for key in _KEYS if item.get(key) not in (None, "", [])}


def feedback_cases(
    rating: str | None = None, assistant: str | None = None, since: datetime | None = None
) -> Iterator[str]:
    """The JSONL lines of the rated answers, oldest rating first."""
    ratings = ChatFeedback.objects.select_related("message").order_by("updated_at", "pk")
    if rating:
        ratings = ratings.filter(rating=rating)
    if assistant:
        ratings = ratings.filter(assistant=assistant)
    if since is not None:
        ratings = ratings.filter(updated_at__gte=since)
    for feedback in ratings.iterator():
        answer = feedback.message
        before = ChatMessage.objects.filter(
            session_id=answer.session_id, superseded=False, position__lt=answer.position
        ).order_by("position")
        case = {
            "message_id": answer.pk,
            "session_id": str(answer.session_id),
            "assistant": feedback.assistant,
            "rating": feedback.rating,
            "comment": feedback.comment,
            "rated_at": iso(feedback.updated_at),
            "conversation": [_message(history_item(row)) for row in before],
            "answer": _message(history_item(answer)),
        }
        yield json.dumps(case, ensure_ascii=False)
