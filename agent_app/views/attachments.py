"""The attachment endpoints: upload a file to a chat, and read one back.

``upload`` (``POST <prefix>/s/<chat id>/attachments/``, multipart field ``file``) answers
``201 {id, name, media_type, size, url}``; ``download`` (``GET .../attachments/<id>/``)
sends the bytes. Both take the chat's owner only: a signed-in user or the anonymous
browser (cookies, so the upload is CSRF-checked), or a program with an API token
(``Authorization: Bearer``, no cookies, so no CSRF). Anyone else gets the 404 a chat that
does not exist gets.

Every refusal is JSON, ``{"code": ..., "message": ...}``, with the sentence the page shows
next to the file's chip: the CSRF check is run here (the view is exempt from the
middleware's, whose refusal is an HTML page), and so are the checks of the file
(``check_attachment``), the daily quota and the chat's own rules. The file is checked
before anything is stored; a chat not stored yet is stored by its first upload exactly as
by its first message (``ensure_session``: the chats-per-hour quota, the assistant's
permission, a deleted chat stays deleted).

The download is sent with the sniffed type, ``nosniff`` and a sandboxing CSP; only images
are shown inline, anything else is a download. ``?thumbnail=1`` on an image larger than
``THUMBNAIL_SIDE`` answers it scaled down (the page's thumbnails: a conversation of
screenshots does not load them whole).
"""

from __future__ import annotations

import io
import uuid
from typing import Any

from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from PIL import Image

from agent_app import conf
from agent_app.attachments.declared import declared_file
from agent_app.attachments.names import sanitize_name
from agent_app.attachments.refusals import AttachmentRefused
from agent_app.attachments.sniffing import IMAGE_TYPES, KNOWN_TYPES
from agent_app.attachments.stored import attachment_ref, check_quota, store_attachment
from agent_app.attachments.validation import check_attachment, check_size
from agent_app.guard.access import (
    Creation,
    Person,
    assistant_refusal,
    chat_quota_message,
    ensure_session,
    known_person_of_request,
    may_open,
)
from agent_app.guard.bodies import body_limit
from agent_app.guard.tokens import TokenRefused, bearer_secret, user_of_secret
from agent_app.models import ChatAttachment, ChatSession

__all__ = ["download", "upload"]

#: The HTTP status of each refusal of a file.
_STATUS = {
    "empty": 400,
    "no_file": 400,
    "too_large": 413,
    "unsupported_type": 415,
    "type_mismatch": 415,
    "image_too_large": 422,
    "bad_file": 422,
    "quota_exceeded": 429,
}
_NOT_FOUND = "There is no chat session with this id."


def refusal(code: str, message: str, status: int | None = None) -> JsonResponse:
    """A refused request as the page reads it."""
    return JsonResponse({"code": code, "message": message}, status=status or _STATUS[code])


class _Refused(Exception):
    def __init__(self, response: JsonResponse) -> None:
        self.response = response


def _caller(request: HttpRequest) -> tuple[Person, Any]:
    """The person behind the request and their user; ``_Refused`` when there is none."""
    authorization = request.headers.get("Authorization", "")
    try:
        # Only a Bearer header is a token: a proxy's Basic sign-in in front of the site is
        # not this app's business, and the page's cookies still say who it is.
        secret = (
            bearer_secret([(b"authorization", authorization.encode("latin-1"))])
            if authorization.lower().startswith("bearer")
            else None
        )
        if secret is not None:
            user = user_of_secret(secret)
            return Person(user.pk, None), user
    except TokenRefused:
        raise _Refused(refusal("unauthorized", "This API token is not valid.", 401)) from None
    if request.method == "POST":
        failed = CsrfViewMiddleware(lambda _: HttpResponse()).process_view(
            request, lambda _: None, (), {}
        )
        if failed is not None:
            message = "The page's security token is missing or old; reload the page."
            raise _Refused(refusal("forbidden", message, 403))
    # Read only: a request without the cookie a page gives is nobody's (and costs no
    # session row).
    person = known_person_of_request(request)
    if person is None:
        raise _Refused(refusal("forbidden", "Sign in to attach files.", 403))
    return person, request.user


def _store_chat(person: Person, user: Any, session_id: str, assistant: str) -> None:
    """Store a new chat at its first upload, as its first message would."""
    code, why = assistant_refusal(user, session_id, assistant or None)
    if code:
        raise _Refused(refusal(code, why, 404 if code == "unknown_assistant" else 403))
    created = ensure_session.func(person, session_id, assistant)
    if created is Creation.FORBIDDEN:
        raise _Refused(refusal("not_found", _NOT_FOUND, 404))
    if created is Creation.QUOTA:
        raise _Refused(refusal("rate_limited", chat_quota_message(), 429))
    if created is Creation.DELETED:
        raise _Refused(refusal("deleted", "This chat was deleted.", 410))


#: Room in a request for the form's own parts besides the file's bytes.
_FORM_OVERHEAD = 64 * 1024


def upload_body_limit() -> int:
    """The largest upload body: a file of ``ZETT_ATTACHMENT_MAX_BYTES`` and its form."""
    return int(conf.ZETT_ATTACHMENT_MAX_BYTES) + _FORM_OVERHEAD


def _check_declared_length(request: HttpRequest, max_bytes: int) -> None:
    """Refuse a body that declares more than a file of ``max_bytes`` needs, unparsed: the
    refusal names the file and its size, read from the body's head (``declared_file``)."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared <= max_bytes + _FORM_OVERHEAD:
        return
    found = declared_file(request.META.get("CONTENT_TYPE", ""), declared, request)
    if found is None:
        check_size(declared - _FORM_OVERHEAD, max_bytes=max_bytes, name=None)
    else:
        check_size(
            max(found.size, max_bytes + 1), max_bytes=max_bytes, name=sanitize_name(found.name)
        )


@csrf_exempt
@body_limit(upload_body_limit)  # refused before it is read (under daphne)
def upload(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Check a file, store it and answer its reference (see the module docstring)."""
    if request.method != "POST":
        return refusal("method_not_allowed", "Upload a file with POST.", 405)
    try:
        person, user = _caller(request)
        max_bytes = int(conf.ZETT_ATTACHMENT_MAX_BYTES)
        _check_declared_length(request, max_bytes)
        session = ChatSession.objects.filter(pk=session_id).first()
        if session is not None and not may_open(person, session):
            return refusal("not_found", _NOT_FOUND, 404)
        upload = request.FILES.get("file")
        if upload is None:
            return refusal("no_file", "Send the file in the form field 'file'.")
        check_size(upload.size or 0, max_bytes=max_bytes, name=sanitize_name(upload.name))
        data = upload.read()
        types = conf.ZETT_ATTACHMENT_TYPES
        checked = check_attachment(
            data, upload.name, max_bytes=max_bytes, types=KNOWN_TYPES if types is None else types
        )
        check_quota(person.key, checked.size)
        if session is None:
            _store_chat(person, user, str(session_id), request.POST.get("assistant", ""))
        row = store_attachment(session_id, person.key, checked, data)
    except AttachmentRefused as refused:
        return refusal(refused.code, str(refused))
    except _Refused as refused:
        return refused.response
    except MultiPartParserError:
        return refusal("bad_request", "The upload is not a readable multipart form.", 400)
    return JsonResponse(attachment_ref(row), status=201)


def download(request: HttpRequest, session_id: uuid.UUID, attachment_id: uuid.UUID) -> HttpResponse:
    """Send an attachment's bytes to its chat's owner."""
    if request.method not in ("GET", "HEAD"):
        return refusal("method_not_allowed", "Read an attachment with GET.", 405)
    try:
        person, _ = _caller(request)
    except _Refused as refused:
        return refused.response
    row = (
        ChatAttachment.objects.select_related("session")
        .filter(pk=attachment_id, session_id=session_id)
        .first()
    )
    if row is None or not may_open(person, row.session):
        return refusal("not_found", "There is no such attachment in this chat.", 404)
    inline = row.media_type in IMAGE_TYPES
    if inline and request.GET.get("thumbnail") and _larger_than_a_thumbnail(row):
        response = _thumbnail(row)
    else:
        response = _file_response(row, inline)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response


#: The longest side of a thumbnail (``?thumbnail=1``), in pixels.
THUMBNAIL_SIDE = 512


def _larger_than_a_thumbnail(row: ChatAttachment) -> bool:
    return max(row.width or 0, row.height or 0) > THUMBNAIL_SIDE


def _thumbnail(row: ChatAttachment) -> HttpResponse:
    """The image scaled to fit ``THUMBNAIL_SIDE`` (the first frame of an animation)."""
    with row.file.open("rb") as handle, Image.open(handle) as image:
        if image.format == "JPEG":
            image.draft("RGB", (THUMBNAIL_SIDE, THUMBNAIL_SIDE))
        image.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
        clear = image.mode in ("RGBA", "LA", "P", "PA")
        small = image.convert("RGBA" if clear else "RGB")
    out = io.BytesIO()
    small.save(out, "PNG" if clear else "JPEG", quality=85)
    return HttpResponse(out.getvalue(), content_type="image/png" if clear else "image/jpeg")


def _file_response(row: ChatAttachment, inline: bool) -> HttpResponse:
    return FileResponse(
        row.file.open("rb"),
        content_type=row.media_type,
        as_attachment=not inline,
        filename=row.name,
    )
