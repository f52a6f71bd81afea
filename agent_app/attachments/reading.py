"""What a run reads of a chat's attachments: their bytes, looked up by the run's chat.

``read_attachment_file`` is the app's ``AttachmentReader`` (``AttachmentExtension`` and the
``read_attachment`` tool call it when a provider request is built or the tool runs): only
an attachment of the chat the run is in is found, so a model can never read another
chat's files, whatever id it names. The model class is looked up through the app registry,
not imported: the agent factory imports this module, and the models module already
depends on the factory (an assistant's name), so an import would close a cycle.
"""

from __future__ import annotations

import functools
import logging
import uuid
from contextvars import ContextVar

from django.apps import apps

from agent_app.attachments.content import AttachmentFile
from agent_app.process.connection import default_connection

__all__ = [
    "documents_exists_sql",
    "documents_parameter",
    "has_documents",
    "has_documents_orm",
    "note_documents",
    "noted_documents",
    "read_attachment_file",
]

logger = logging.getLogger(__name__)

#: The media types ``has_documents`` leaves out (the reading tool reads no image).
_IMAGES = "image/"

#: ``has_documents`` of the run's chat, read with the chat as the run is stored
#: (``agent_app.assistants.read_entry``, in the same thread hop): ``(session id, answer)``.
_noted: ContextVar[tuple[str, bool] | None] = ContextVar("zett_noted_documents", default=None)


def _attachments():
    return apps.get_model("agent_app", "ChatAttachment").objects


def read_attachment_file(session_id: str, attachment_id: str) -> AttachmentFile | None:
    """The bytes of the chat's attachment; None when the chat has no such attachment."""
    try:
        pk = uuid.UUID(str(attachment_id))
    except ValueError:
        return None
    row = _attachments().filter(session_id=session_id, pk=pk).first()
    if row is None:
        return None
    try:
        with row.file.open("rb") as handle:
            data = handle.read()
    except OSError:
        logger.warning("The file of attachment %s could not be read", row.pk)
        return None
    return AttachmentFile(str(row.pk), row.name, row.media_type, data)


def has_documents(session_id: str) -> bool:
    """Whether the chat holds an attachment that is no image (one the tool can read).

    Every run asks it: one statement written out once per backend (``_documents_sql``),
    the same as ``has_documents_orm``'s query, which a test checks it against.
    """
    db = default_connection()
    model = _attachments().model
    session = model._meta.get_field("session")
    params = [session.get_db_prep_value(session_id, db), documents_parameter()]
    with db.cursor() as cursor:
        cursor.execute(_documents_sql(db.vendor), params)
        return cursor.fetchone() is not None


def has_documents_orm(session_id: str) -> bool:
    """``has_documents`` through the ORM (the plain form)."""
    return (
        _attachments()
        .filter(session_id=session_id)
        .exclude(media_type__startswith=_IMAGES)
        .exists()
    )


@functools.cache
def _documents_sql(vendor: str) -> str:
    """``has_documents``' statement on one backend: ``startswith`` as the ORM writes it."""
    return f"SELECT 1 {_documents_of(vendor, '%s')} LIMIT 1"


@functools.cache
def documents_exists_sql(vendor: str, session: str) -> str:
    """``has_documents`` as an expression of another statement, for the chat whose key is
    the SQL ``session`` (a column): ``begin_run`` reads it with the chat's row, at no
    statement of its own. Its one parameter is ``documents_parameter()``."""
    return f"EXISTS (SELECT 1 {_documents_of(vendor, session)})"


def documents_parameter() -> str:
    """The parameter of ``documents_exists_sql`` (the image types it leaves out)."""
    return default_connection().ops.prep_for_like_query(_IMAGES) + "%"


def _documents_of(vendor: str, session: str) -> str:
    """``FROM … WHERE …``: the attachments of the chat ``session`` that are no image."""
    db = default_connection()
    meta, quote = _attachments().model._meta, db.ops.quote_name
    media_type = quote(meta.get_field("media_type").column)
    return (
        f"FROM {quote(meta.db_table)} "
        f"WHERE {quote(meta.get_field('session').column)} = {session} "
        f"AND NOT ({media_type} {db.operators['startswith'] % '%s'})"
    )


def note_documents(session_id: str, holds: bool) -> None:
    """Keep ``has_documents(session_id)``, just read, for the calling task's run."""
    _noted.set((session_id, holds))


def noted_documents(session_id: str) -> bool | None:
    """What ``note_documents`` kept for ``session_id`` in this context; None when nothing
    is kept (the caller asks the database)."""
    noted = _noted.get()
    return noted[1] if noted is not None and noted[0] == session_id else None
