"""Attachments as the app stores them: ``ChatAttachment`` rows and their files.

The bytes go to Django's ``STORAGES["default"]`` (local files, or S3/GCS/Azure through
django-storages, with no code here), under a name the app chooses; the row keeps what was
checked (``check_attachment``): the clean name, the sniffed type, the size. Everything else
refers to an attachment by id:

- a stored ``UserMessage`` lists its ids in ``attributes["attachments"]``;
- frames carry *references* (``attachment_ref``): ``{id, name, media_type, size, url}``,
  where ``url`` is the app's download view, which checks the chat's owner on every request
  (a storage URL is never handed out);
- a run reads the bytes through ``agent_app.attachments.reading`` when the provider request
  is built (``AttachmentExtension``), and only the files of the chat it runs in.

Files leave with their rows: a ``post_delete`` receiver removes the file once the deleting
transaction commits, for every way a row goes — one chat deleted, a queryset of chats
deleted at once (Django sends ``post_delete`` for each cascaded row as long as a receiver
listens), a user deleted with their chats. A file whose removal fails is logged, never
raised: the chat is gone either way.

The daily quota counts the uploader's rows of the last 24 hours (files and bytes); two
uploads racing at the quota's edge may both pass, which overshoots by one file at most per
worker.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import Count, Sum
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.urls import reverse
from django.utils import timezone

from agent_app import conf
from agent_app.attachments.refusals import AttachmentRefused
from agent_app.attachments.validation import CheckedAttachment
from agent_app.models import ChatAttachment

__all__ = [
    "UnknownAttachments",
    "attachment_ref",
    "attachment_refs",
    "chat_attachment_ids",
    "check_quota",
    "refs_by_id",
    "store_attachment",
]

logger = logging.getLogger(__name__)

#: How far back the daily quota looks.
QUOTA_WINDOW = timedelta(hours=24)


class UnknownAttachments(ValueError):
    """A message named attachment ids that are not its chat's (or are no ids at all)."""

    def __init__(self, ids: Sequence[str]) -> None:
        shown = ", ".join(ids[:3]) + (" …" if len(ids) > 3 else "")
        super().__init__(
            f"This chat has no attachment {shown}. Attach the file to this chat again."
        )
        self.ids = list(ids)


def check_quota(uploader: str, size: int) -> None:
    """Refuse an upload of ``size`` bytes that would pass the uploader's daily quota."""
    since = timezone.now() - QUOTA_WINDOW
    used = ChatAttachment.objects.filter(uploader=uploader, created_at__gte=since).aggregate(
        files=Count("pk"), bytes=Sum("size")
    )
    files, taken = used["files"] or 0, used["bytes"] or 0
    if files >= int(conf.ZETT_ATTACHMENT_DAILY_FILES):
        raise AttachmentRefused(
            "quota_exceeded",
            f"You attached {files} files in the last 24 hours, the most allowed; try again later.",
        )
    limit = int(conf.ZETT_ATTACHMENT_DAILY_BYTES)
    if taken + size > limit:
        raise AttachmentRefused(
            "quota_exceeded",
            f"You attached {taken // (1024 * 1024)} MB in the last 24 hours; this file would "
            f"pass the daily limit of {limit // (1024 * 1024)} MB. Try again later.",
        )


def store_attachment(
    session_id: Any, uploader: str, checked: CheckedAttachment, data: bytes
) -> ChatAttachment:
    """Write the file to storage and its row; the file is removed again if the row fails."""
    row = ChatAttachment(
        session_id=session_id,
        uploader=uploader,
        name=checked.name,
        media_type=checked.media_type,
        size=checked.size,
        width=checked.width,
        height=checked.height,
    )
    row.file.save(str(row.pk), ContentFile(data), save=False)
    try:
        row.save(force_insert=True)
    except BaseException:
        _remove_file(row.file.name)
        raise
    return row


def attachment_ref(row: ChatAttachment) -> dict[str, Any]:
    """What frames carry of an attachment: never its bytes, never a storage URL."""
    return {
        "id": str(row.pk),
        "name": row.name,
        "media_type": row.media_type,
        "size": row.size,
        "url": reverse(
            "agent_app:attachment",
            kwargs={"session_id": row.session_id, "attachment_id": row.pk},
        ),
    }


def _uuids(ids: Iterable[Any]) -> list[uuid.UUID] | None:
    try:
        return [uuid.UUID(str(value)) for value in ids]
    except ValueError:
        return None


def attachment_refs(session_id: Any, ids: Iterable[Any]) -> list[dict[str, Any]]:
    """The references of the chat's attachments ``ids``, in that order (unknown ones left out)."""
    wanted = _uuids(ids) or []
    if not wanted:
        return []
    rows = ChatAttachment.objects.filter(session_id=session_id, pk__in=wanted)
    found = {row.pk: attachment_ref(row) for row in rows}
    return [found[value] for value in wanted if value in found]


def refs_by_id(session_id: Any, ids: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """``attachment_refs`` keyed by id: one query for a whole page of history."""
    return {ref["id"]: ref for ref in attachment_refs(session_id, ids)}


def chat_attachment_ids(session_id: Any, ids: Sequence[Any]) -> list[str]:
    """``ids`` once each, in order, if every one is the chat's; else ``UnknownAttachments``."""
    unique = list(dict.fromkeys(str(value) for value in ids))
    parsed = _uuids(unique)
    if parsed is None:
        raise UnknownAttachments([value for value in unique if _uuids([value]) is None])
    found = {
        str(pk)
        for pk in ChatAttachment.objects.filter(session_id=session_id, pk__in=parsed).values_list(
            "pk", flat=True
        )
    }
    missing = [str(value) for value in parsed if str(value) not in found]
    if missing:
        raise UnknownAttachments(missing)
    return [str(value) for value in parsed]


@receiver(post_delete, sender=ChatAttachment, dispatch_uid="zett.attachment_deleted")
def attachment_deleted(sender: Any, instance: ChatAttachment, **kwargs: Any) -> None:
    """Remove the file once the row's deletion is committed (a rollback keeps both)."""
    name = instance.file.name
    if name:
        transaction.on_commit(lambda: _remove_file(name))


def _remove_file(name: str) -> None:
    from django.core.files.storage import default_storage

    try:
        default_storage.delete(name)
    except Exception:
        logger.warning("Could not remove the attachment file %s from storage", name)
