"""Background runs over HTTP: start one and check back later, no stream held open.

- ``POST api/chats/<id>/runs/`` ``{"content", "assistant"?, "attachments"?}`` starts a
  run of the chat (a new chat id stores the chat, the caller's) and answers ``202``
  ``{"request_id", "status": "running", "chat_id"}`` at once, with the status URL in
  ``Location``. The body is checked as a chat socket's ``user_message`` is
  (``agent_app.protocol.frames.parse_frame``: a blank, non-string or over-32-KiB
  ``content`` is 400).
- ``GET api/chats/<id>/runs/<request_id>/`` answers the run's state
  (``agent_app.background.state``): ``status``, ``answer``, ``pending``, ``usage``,
  ``error``.

Auth, the person's budget and the 404 for anyone else's chat are the JSON API's
(``agent_app.api.common``): a request with no token and no session cookie is 401. A
body is a ``user_message`` frame's size at most (refused before it is read).
Refusals are JSON ``{"code", "message", "error": {"code", "message"}}``. The run itself
is ``agent_app.background.start``'s: following it live is the AG-UI re-attach
(``api/ag-ui/threads/<id>/events``), cancelling it ``api/chats/<id>/cancel/``, answering
its questions any socket or an AG-UI resume.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.api.common import authorized, chat_id, own_chat, refusal
from agent_app.attachments.stored import UnknownAttachments, chat_attachment_ids
from agent_app.background.start import start_background_run
from agent_app.background.state import run_state
from agent_app.guard.bodies import body_limit
from agent_app.protocol.frames import MAX_FRAME_BYTES, FrameError, UserMessageFrame, parse_frame
from agent_app.protocol.frames import ErrorCode as FrameCode

__all__ = ["run", "runs"]

#: The fields a body may have.
FIELDS = frozenset({"content", "assistant", "attachments"})


def _refused(error: AguiError) -> JsonResponse:
    response = refusal(error)
    body = json.loads(response.content)
    body["error"] = {"code": error.code, "message": error.message}
    response.content = json.dumps(body).encode("utf-8")
    return response


@csrf_exempt  # checked by ``authorized`` for cookie requests only (a token needs none)
@body_limit(lambda: MAX_FRAME_BYTES)  # a message's frame at most, refused before it is read
async def runs(request: HttpRequest, session_id: str) -> HttpResponse:
    """``POST``: start a background run of the chat (see the module docstring)."""
    if request.method != "POST":
        return _not_allowed("POST")
    try:
        caller = await authorized(request)
        thread = chat_id(session_id)
        wanted = _input(request)
        await own_chat(caller.person, thread, missing_ok=True)
        attachments: list[str] = []
        if wanted.attachments:
            attachments = await sync_to_async(_attachments)(thread, wanted.attachments)
        request_id = await start_background_run(
            caller.person,
            caller.user,
            thread,
            wanted.content,
            assistant=wanted.assistant,
            attachments=attachments,
        )
    except AguiError as error:
        return _refused(error)
    response = JsonResponse(
        {"request_id": request_id, "status": "running", "chat_id": thread}, status=202
    )
    response["Location"] = f"{request.path.rstrip('/')}/{request_id}/"
    return response


@csrf_exempt
async def run(request: HttpRequest, session_id: str, request_id: str) -> HttpResponse:
    """``GET``: the state of one run of the chat."""
    if request.method != "GET":
        return _not_allowed("GET")
    try:
        caller = await authorized(request)
        row = await own_chat(caller.person, chat_id(session_id))
        state = await sync_to_async(run_state)(str(row.pk), request_id)
        if state is None:
            raise AguiError(ErrorCode.NOT_FOUND, "This chat has no run with this id", status=404)
    except AguiError as error:
        return _refused(error)
    return JsonResponse(state)


def _input(request: HttpRequest) -> UserMessageFrame:
    """The body as the ``user_message`` it stands for (``AguiError`` 400 if it is none)."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise AguiError(
            ErrorCode.TOO_LARGE,
            f"The body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes",
            status=413,
        ) from None
    try:
        data: Any = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        raise AguiError(ErrorCode.BAD_JSON, "The body is not JSON") from None
    if not isinstance(data, dict):
        raise AguiError(ErrorCode.BAD_INPUT, 'The body is a JSON object: {"content": "…"}')
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise AguiError(
            ErrorCode.BAD_INPUT, f"Unknown field {unknown[0]!r}; the fields are {sorted(FIELDS)}"
        )
    try:
        frame = parse_frame(json.dumps({**data, "type": "user_message"}))
    except FrameError as bad:
        code = ErrorCode.TOO_LARGE if bad.code == FrameCode.TOO_LARGE else ErrorCode.BAD_INPUT
        raise AguiError(code, _body_words(bad.message)) from None
    assert isinstance(frame, UserMessageFrame)
    return frame


def _body_words(message: str) -> str:
    """A frame error's message, worded for a request body."""
    return (
        message.replace("Invalid user_message frame: ", "Invalid body: ")
        .replace("user_message content", "content")
        .replace("in a frame", "in the body")
    )


def _attachments(session_id: str, ids: list[str]) -> list[str]:
    try:
        return chat_attachment_ids(session_id, ids)
    except UnknownAttachments as unknown:
        raise AguiError(ErrorCode.BAD_INPUT, str(unknown)) from None


def _not_allowed(method: str) -> HttpResponse:
    response = _refused(AguiError(ErrorCode.BAD_INPUT, f"Use {method}", status=405))
    response["Allow"] = method
    return response
