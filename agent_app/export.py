"""A chat as a file to keep: Markdown to read, JSON for programs (docs/http-api.md).

Both hold the conversation as the chat page shows it: the shown path through the turns'
versions (a turn answered again or edited exports the version on screen; the JSON says
which, ``versions``), oldest first. Files are named, never included: an attachment is its
name, type and size. The JSON keeps the tool calls and their results; the Markdown names the
tools used, since their arguments are for programs. Messages the runtime keeps for itself
(system prompts, summaries of compacted history) are left out of both.

Only the chat's owner, and staff (``agent_app.staff_chat``), may export it; anyone else
gets a 404, exactly as for a chat that does not exist. A GET writes nothing.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from django.views.decorators.http import require_GET

from agent_app.assistants import registry
from agent_app.attachments.extension import ATTACHMENTS_ATTRIBUTE
from agent_app.attachments.stored import refs_by_id
from agent_app.durable.store import message_from_row
from agent_app.guard.access import known_person_of_request, may_open
from agent_app.models import STAFF_ROLE, ChatMessage, ChatSession
from zett_agent.serialization import message_to_dict

__all__ = ["export_json", "export_markdown", "exported_messages"]

#: The roles a person saw in the chat (``agent``/``system`` are the runtime's own).
SHOWN_ROLES = ("user", "assistant", "tool", STAFF_ROLE)
#: Longest title part of a file name.
FILENAME_TITLE_LENGTH = 60
#: What the JSON says it is, for programs that read many kinds of files.
FORMAT = "zett.chat"
FORMAT_VERSION = 1


def _exportable(request: HttpRequest, session_id: uuid.UUID) -> ChatSession:
    """The stored chat, when the visitor owns it or is staff; else a 404."""
    session = ChatSession.objects.filter(pk=session_id).first()
    if session is not None:
        user = request.user
        if user.is_authenticated and user.has_perm("agent_app.staff_chat"):
            return session
        if may_open(known_person_of_request(request), session):
            return session
    raise Http404("There is no chat session with this id.")


def exported_messages(session: ChatSession) -> list[dict[str, Any]]:
    """The messages of the shown path, oldest first, as the JSON export lists them."""
    rows = ChatMessage.objects.filter(
        session_id=session.pk, superseded=False, role__in=SHOWN_ROLES
    ).order_by("position")
    items = [_item(row) for row in rows]
    ids = [value for item in items for value in item.get("attachments", [])]
    refs = refs_by_id(session.pk, ids) if ids else {}
    for item in items:
        if "attachments" in item:
            item["attachments"] = [
                {key: refs[value][key] for key in ("name", "media_type", "size")}
                for value in item["attachments"]
                if value in refs
            ]
    return items


def _item(row: ChatMessage) -> dict[str, Any]:
    """One stored message as exported: what it said and when, without runtime bookkeeping."""
    if row.role == STAFF_ROLE:
        staff = (row.extra or {}).get("staff") or {}
        item: dict[str, Any] = {"role": STAFF_ROLE, "content": row.content}
        item["staff"] = {"name": staff.get("name") or ""}
    else:
        data = message_to_dict(message_from_row(row))
        item = {"role": data["role"], "content": data["content"]}
        for key in ("tool_calls", "reasoning", "model", "tool_call_id", "name", "success"):
            if data.get(key) not in (None, []):
                item[key] = data[key]
        ids = (data.get("attributes") or {}).get(ATTACHMENTS_ATTRIBUTE)
        if isinstance(ids, list) and ids:
            item["attachments"] = [str(value) for value in ids]  # named below
    item.update(position=row.position, created_at=_iso(row.created_at))
    if row.steering:
        item["steering"] = True
    if row.partial:
        item["partial"] = True
        item["stop_reason"] = row.stop_reason or None
    if row.versions > 1:
        item["versions"] = {"index": row.version, "count": row.versions}
    return item


def _iso(moment: Any) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _assistant_name(session: ChatSession) -> str:
    return registry.display_name_of(session.assistant or "") or "Assistant"


def _download(session: ChatSession, body: str, extension: str, media_type: str) -> HttpResponse:
    """``body`` as a file to save, named after the chat's title and day (ASCII only)."""
    slug = slugify(session.title)[:FILENAME_TITLE_LENGTH].strip("-") or "chat"
    filename = f"{slug}-{timezone.localdate(session.created_at).isoformat()}.{extension}"
    response = HttpResponse(body, content_type=f"{media_type}; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["Cache-Control"] = "private, no-store"
    return response


@require_GET
def export_json(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The chat as JSON: its fields, and every shown message with tool calls and results."""
    session = _exportable(request, session_id)
    document = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "id": str(session.pk),
        "title": session.title,
        "assistant": {"id": session.assistant, "name": _assistant_name(session)},
        "created_at": _iso(session.created_at),
        "exported_at": _iso(timezone.now()),
        "messages": exported_messages(session),
    }
    body = json.dumps(document, ensure_ascii=False, indent=2)
    return _download(session, body, "json", "application/json")


@require_GET
def export_markdown(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The chat as Markdown: a heading for each message, its text as written."""
    session = _exportable(request, session_id)
    assistant = _assistant_name(session)
    lines = [f"# {session.title or 'Untitled chat'}", ""]
    lines += [f"Chat with {assistant}, started {_iso(session.created_at)}.", ""]
    for item in exported_messages(session):
        lines += _markdown_of(item, assistant)
    return _download(session, "\n".join(lines).rstrip() + "\n", "md", "text/markdown")


def _markdown_of(item: dict[str, Any], assistant: str) -> list[str]:
    """The Markdown lines of one exported message (none for a tool's result)."""
    role = item["role"]
    if role == "tool":
        return []
    if role == "user":
        heading = "You (steering)" if item.get("steering") else "You"
    elif role == STAFF_ROLE:
        heading = f"{item['staff']['name'] or 'Staff'} (staff)"
    else:
        heading = assistant
    lines = [f"## {heading}", ""]
    text = _text(item.get("content")).strip()
    if text:
        lines += [text, ""]
    names = [file["name"] for file in item.get("attachments", [])]
    if names:
        lines += ["Attached: " + ", ".join(f"`{name}`" for name in names), ""]
    tools = [call["name"] for call in item.get("tool_calls", [])]
    if tools:
        lines += ["Used: " + ", ".join(f"`{name}`" for name in tools), ""]
    if item.get("partial"):
        lines += ["*(stopped before the end)*", ""]
    return lines if len(lines) > 2 else []


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")
