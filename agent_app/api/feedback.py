"""``POST <prefix>/api/messages/<id>/feedback/``: rate an answer, as the ``feedback`` frame.

Body ``{"rating": "up"|"down", "comment"?: str}``; the answer is 201 with the rating when
it is new, 200 when it changed one. An answer in someone else's chat is a 404, like one
that does not exist; a bad rating or comment is a 400.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.api.common import authorized, refusal
from agent_app.guard.access import visible_sessions
from agent_app.people import records

__all__ = ["feedback"]


def _body(request: HttpRequest) -> tuple[str, str]:
    """``(rating, comment)`` of a well-formed body (``AguiError`` 400 otherwise)."""
    try:
        data: Any = json.loads(request.body or b"{}")
    except ValueError:
        raise AguiError(ErrorCode.BAD_JSON, "The body is not JSON", status=400) from None
    if not isinstance(data, dict):
        raise AguiError(ErrorCode.BAD_INPUT, "The body must be a JSON object", status=400)
    rating, comment = data.get("rating"), data.get("comment", "")
    if rating not in ("up", "down"):
        raise AguiError(ErrorCode.BAD_INPUT, "'rating' must be 'up' or 'down'", status=400)
    if not isinstance(comment, str) or len(comment) > records.MAX_COMMENT_CHARS:
        message = f"'comment' must be text of at most {records.MAX_COMMENT_CHARS} characters"
        raise AguiError(ErrorCode.BAD_INPUT, message, status=400)
    if "\x00" in comment:
        raise AguiError(ErrorCode.BAD_INPUT, "'comment' may not contain NUL", status=400)
    return rating, comment


@csrf_exempt
async def feedback(request: HttpRequest, message_id: int) -> HttpResponse:
    """Give or change the caller's rating of one answer of their own chats."""
    if request.method != "POST":
        response = refusal(AguiError(ErrorCode.BAD_INPUT, "Use POST", status=405))
        response["Allow"] = "POST"
        return response
    try:
        caller = await authorized(request)
        rating, comment = _body(request)
        person = caller.person
        try:
            saved, created = await sync_to_async(records.rate)(
                visible_sessions(person), person.key, person.user_id, message_id, rating, comment
            )
        except records.NotYours:
            raise AguiError(
                ErrorCode.NOT_FOUND, "There is no answer with this id", status=404
            ) from None
        return JsonResponse(records.feedback_item(saved), status=201 if created else 200)
    except AguiError as error:
        return refusal(error)
