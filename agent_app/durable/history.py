"""What a client is shown of a session's past: the ``session`` frame and history pages.

A conversation can outgrow any one frame (daphne refuses frames over 1 MiB), so history
travels in pages, newest first: the ``session`` frame carries the newest messages (at most
``ZETT_HISTORY_PAGE`` and ``SESSION_FRAME_BUDGET`` bytes), ``history_before`` the ones
before a position. A single message too large for a page is sent cut
(``content_truncated``); the stored row stays whole.

Each item is the stored message (``message_to_dict``) plus what the row knows beyond it:
position, request, time, steering/partial/stop reason, usage; a user message with files
also gets their references (``attachments``: ``{id, name, media_type, size, url}``, one
query a page; the bytes never travel in history). The runs of the listed
messages come along, so a page can say how each request ended (docs/protocol.md).
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from typing import Any

from django.db import connection

from agent_app import conf
from agent_app.attachments.extension import ATTACHMENTS_ATTRIBUTE
from agent_app.attachments.stored import refs_by_id
from agent_app.durable.runs import run_item
from agent_app.durable.store import message_from_row
from agent_app.durable.support import Support, support_of
from agent_app.durable.waits import pending_items
from agent_app.models import STAFF_ROLE, ChatMessage, ChatRun, ChatSession
from agent_app.models.statements import execute, instance_from, returned_columns
from zett_agent.serialization import message_to_dict

__all__ = [
    "HISTORY_ITEM_BUDGET",
    "SESSION_FRAME_BUDGET",
    "branch_page",
    "history_item",
    "page_before",
    "shown_path",
    "snapshot",
]

#: Bytes of history items in a ``session`` frame: with the frame's other fields it stays
#: under 64 KiB, so opening a chat is fast however long the conversation.
SESSION_FRAME_BUDGET = 56 * 1024
#: Bytes of history items in a ``history_page`` frame.
PAGE_FRAME_BUDGET = 384 * 1024
#: Largest single history item; a longer message is sent with its content cut.
HISTORY_ITEM_BUDGET = 48 * 1024
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def history_item(row: ChatMessage) -> dict[str, Any]:
    """A stored message as clients see it (cut to ``HISTORY_ITEM_BUDGET``)."""
    return _sized_item(row)[0]


def _sized_item(row: ChatMessage) -> tuple[dict[str, Any], int]:
    """``history_item`` and its encoded size: a page weighs each item against its budget,
    and encoding it once for both the cut and the budget saves a JSON encoding a row."""
    if row.role == STAFF_ROLE:
        staff = (row.extra or {}).get("staff") or {}
        item = {"role": STAFF_ROLE, "content": row.content, "attributes": {}}
        item["staff"] = {"name": staff.get("name") or ""}
    else:
        try:
            item = message_to_dict(message_from_row(row))
        except (ValueError, KeyError, TypeError):
            item = {"role": row.role, "content": "", "attributes": {}, "unreadable": True}
    item.update(
        id=row.pk,
        position=row.position,
        request_id=row.request_id or None,
        created_at=row.created_at.isoformat().replace("+00:00", "Z"),
        steering=row.steering,
        partial=row.partial,
        stop_reason=row.stop_reason or None,
        usage=row.usage,
    )
    if row.versions > 1:  # a turn with versions (``agent_app.durable.branches``)
        item["versions"] = {"index": row.version, "count": row.versions}
    return _fit(item)


def _fit(item: dict[str, Any]) -> tuple[dict[str, Any], int]:
    size = _size(item)
    if size <= HISTORY_ITEM_BUDGET:
        return item, size
    content = item.get("content")
    text = content if isinstance(content, str) else _ENCODER.encode(content)
    keep = HISTORY_ITEM_BUDGET // 2
    item["content"] = text[:keep]
    item["content_truncated"] = True
    size = _size(item)
    if size > HISTORY_ITEM_BUDGET:  # the rest of the message is huge (arguments …)
        item["tool_calls"] = []
        item["reasoning"] = None
        item["attributes"] = {}
        size = _size(item)
    return item, size


def _size(value: Any) -> int:
    return len(_ENCODER.encode(value).encode("utf-8", "surrogatepass"))


def _page(
    session_id: str,
    *,
    before: int | None,
    limit: int,
    budget: int,
    exclude_request: str | None = None,
    since: int | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """Newest messages of the shown path (before ``before``, from ``since`` on) that fit
    ``budget``, oldest first."""
    rows = ChatMessage.objects.filter(session_id=session_id, superseded=False)
    if before is not None:
        rows = rows.filter(position__lt=before)
    if since is not None:
        rows = rows.filter(position__gte=since)
    if exclude_request:
        rows = rows.exclude(request_id=exclude_request)
    newest = list(rows.order_by("-position")[: limit + 1])
    items: list[dict[str, Any]] = []
    used = 0
    for row in newest[:limit]:
        item, size = _sized_item(row)
        if items and used + size > budget:
            break
        items.append(item)
        used += size
    has_more = len(items) < len(newest)
    items.reverse()
    _add_attachment_refs(session_id, items)
    return items, has_more


def _add_attachment_refs(session_id: str, items: list[dict[str, Any]]) -> None:
    """Give each user message the references of its attachments (one query a page)."""
    named = {
        item["position"]: ids
        for item in items
        if item.get("role") == "user"
        and isinstance(ids := (item.get("attributes") or {}).get(ATTACHMENTS_ATTRIBUTE), list)
        and ids
    }
    if not named:
        return
    refs = refs_by_id(session_id, [value for ids in named.values() for value in ids])
    for item in items:
        ids = named.get(item["position"])
        if ids:
            item["attachments"] = [refs[str(value)] for value in ids if str(value) in refs]


def _runs_of(
    session_id: str, items: list[dict[str, Any]], also: str | None = None
) -> list[dict[str, Any]]:
    request_ids = {item["request_id"] for item in items if item.get("request_id")}
    if also:
        request_ids.add(also)
    if not request_ids:
        return []
    runs = ChatRun.objects.filter(session_id=session_id, request_id__in=request_ids)
    return [run_item(run) for run in runs.order_by("started_at")]


def snapshot(session_id: str, *, active_request_id: str | None) -> dict[str, Any]:
    """The fields of a ``session`` frame (without ``session_id`` and ``last_seq``).

    The active run's own messages are left out: the replay that follows the frame
    rebuilds that run from its first frame — unless the run is a continuation after its
    worker died (``replayed_from_start``): its replay starts at ``run_continued``, so what
    it stored before is history.
    """
    session = (
        ChatSession.objects.filter(pk=session_id)
        .only("title", "last_event_seq", "input_tokens", "output_tokens")
        .first()
    )
    if session is None:
        return {
            "title": "",
            "history": [],
            "has_more_history": False,
            "runs": [],
            "pending": [],
            "usage": _usage(0, 0),
            "support": Support().as_dict(),
            "stored_last_seq": 0,
        }
    limit = max(1, int(conf.ZETT_HISTORY_PAGE))
    items, has_more = _page(
        session_id,
        before=None,
        limit=limit,
        budget=SESSION_FRAME_BUDGET,
        exclude_request=replayed_from_start(active_request_id),
    )
    return {
        "title": session.title,
        "history": items,
        "has_more_history": has_more,
        "runs": _runs_of(session_id, items, also=active_request_id),
        "pending": pending_items(session_id),
        "usage": _usage(session.input_tokens, session.output_tokens),
        "support": support_of(session_id).as_dict(),
        "stored_last_seq": session.last_event_seq,
    }


def bare_snapshot(session_id: str) -> dict[str, Any]:
    """A ``session`` frame's ``stored_last_seq`` alone: for a subscriber that reads only
    the run's frames (an AG-UI event stream), not the history."""
    stored = ChatSession.objects.filter(pk=session_id).values_list("last_event_seq", flat=True)
    return {"stored_last_seq": stored.first() or 0}


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


def shown_path(session_id: str, *, before_request: str | None = None) -> list[dict[str, Any]]:
    """The newest messages of the shown path, as the ``history`` of a ``session`` frame
    has them (one page, its attachments' references), without the frame's other fields'
    queries: what an AG-UI ``MESSAGES_SNAPSHOT`` shows. ``before_request``: without that
    run's messages (the path as it was before the run started).

    Every new message's stream reads it, and a thread's next one mostly the same rows
    again, so the items are kept (``_ShownItems``): one narrow read says which rows the
    page holds now, and only rows not seen before are read whole and encoded."""
    limit = max(1, int(conf.ZETT_HISTORY_PAGE))
    sized = _SHOWN.items_of(session_id, _shown_stamps(session_id, before_request, limit))
    if sized is None:  # a row changed between the two reads: read the page whole
        return _page(
            session_id,
            before=None,
            limit=limit,
            budget=SESSION_FRAME_BUDGET,
            exclude_request=before_request,
        )[0]
    items: list[dict[str, Any]] = []
    used = 0
    for item, size in sized:
        if items and used + size > SESSION_FRAME_BUDGET:
            break
        items.append(dict(item))  # a copy: the page adds attachments to its own
        used += size
    items.reverse()
    _add_attachment_refs(session_id, items)
    return items


def _shown_stamps(session_id: str, before_request: str | None, limit: int) -> list[tuple[Any, ...]]:
    """``_ShownItems.STAMP`` of the newest ``limit`` shown rows, newest first: the narrow
    read, written out once (``_stamps_sql``)."""
    session = ChatMessage._meta.get_field("session").get_db_prep_value(session_id, connection)
    params: list[Any] = [session, False]
    if before_request:
        params.append(before_request)
    params.append(limit)
    with connection.cursor() as cursor:
        execute(cursor, _stamps_sql(connection.vendor, bool(before_request)), params)
        return [tuple(row) for row in cursor.fetchall()]


@functools.cache
def _stamps_sql(vendor: str, before_request: bool) -> str:
    """The statement of ``_shown_stamps`` on one backend, with or without a run left out."""
    meta = ChatMessage._meta
    quote = connection.ops.quote_name
    column = {name: quote(meta.get_field(name).column) for name in _ShownItems.STAMP[1:]}
    sql = (
        f"SELECT {quote(meta.pk.column)}, {column['position']}, {column['version']}, "
        f"{column['versions']}, {column['created_at']} FROM {quote(meta.db_table)} "
        f"WHERE {quote(meta.get_field('session').column)} = %s "
        f"AND {quote(meta.get_field('superseded').column)} = %s"
    )
    if before_request:
        sql += f" AND NOT ({quote(meta.get_field('request_id').column)} = %s)"
    return sql + f" ORDER BY {column['position']} DESC LIMIT %s"


def _rows_by_pk(pks: list[int]) -> list[ChatMessage]:
    """``ChatMessage.objects.filter(pk__in=pks)``, written out (``returned_columns``:
    the same columns, through the same converters)."""
    quote = connection.ops.quote_name
    meta = ChatMessage._meta
    columns = returned_columns(ChatMessage, connection.vendor).sql
    marks = ", ".join(["%s"] * len(pks))
    sql = f"SELECT {columns} FROM {quote(meta.db_table)} WHERE {quote(meta.pk.column)} IN ({marks})"
    with connection.cursor() as cursor:
        execute(cursor, sql, pks)
        return [instance_from(ChatMessage, row) for row in cursor.fetchall()]


class _ShownItems:
    """``_sized_item`` of the rows ``shown_path`` read, per session, by primary key.

    A row is written once, by its run, and rewritten only while that run goes on (an
    atomic tool's result, ``agent_app.durable.store.update_tool_result``) or by a new
    version of its turn, which changes its ``version`` and ``versions``
    (``agent_app.durable.branches``). A snapshot is read when a new run of the thread
    begins, so no other run of it is going on: a row is kept with those columns, its
    position and its time as the database gives them (``STAMP``, the narrow read), and
    read again when they differ.
    Only the rows of a session's last page are kept, for at most ``SESSIONS`` sessions.
    An HTTP request's ORM calls run in a thread of that request's own, so two snapshots may
    read at once: each takes its session's rows out while it reads and puts back what it
    found, so the later of two concurrent reads of one session reads its rows whole, and
    none ever sees another's half-made entry."""

    STAMP = ("pk", "position", "version", "versions", "created_at")
    SESSIONS = 256

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, dict[int, tuple[tuple[Any, ...], dict[str, Any], int]]]
        self._sessions = OrderedDict()

    def items_of(
        self, session_id: str, window: list[tuple[Any, ...]]
    ) -> list[tuple[dict[str, Any], int]] | None:
        """The items and sizes of ``window`` (stamps, newest first), in its order; None
        when a row of it changed before it was read whole."""
        known = self._sessions.pop(session_id, {})
        kept: dict[int, tuple[tuple[Any, ...], dict[str, Any], int]] = {}
        missing = [stamp[0] for stamp in window if known.get(stamp[0], ((),))[0] != stamp]
        if missing:
            stamps = {stamp[0]: stamp for stamp in window}
            for row in _rows_by_pk(missing):
                stamp = stamps[row.pk]
                if (row.position, row.version, row.versions) != stamp[1:4]:
                    return None  # changed between the two reads
                known[row.pk] = (stamp, *_sized_item(row))
        out = []
        for stamp in window:
            entry = known.get(stamp[0])
            if entry is None or entry[0] != stamp:
                return None  # gone between the two reads
            kept[stamp[0]] = entry
            out.append((entry[1], entry[2]))
        self._sessions[session_id] = kept
        while len(self._sessions) > self.SESSIONS:
            self._sessions.popitem(last=False)
        return out


_SHOWN = _ShownItems()


def replayed_from_start(active_request_id: str | None) -> str | None:
    """The active run if its replay starts at its ``run_started`` (its messages are left
    out of history); None for a continued run, whose replay starts at ``run_continued``."""
    if active_request_id is None:
        return None
    continued = ChatRun.objects.filter(request_id=active_request_id, attempts__gt=1).exists()
    return None if continued else active_request_id


def page_before(
    session_id: str, position: int, limit: int, *, active_request_id: str | None
) -> dict[str, Any]:
    """The fields of a ``history_page`` frame: stored messages before ``position``."""
    items, has_more = _page(
        session_id,
        before=position,
        limit=limit,
        budget=PAGE_FRAME_BUDGET,
        exclude_request=replayed_from_start(active_request_id),
    )
    return {"messages": items, "runs": _runs_of(session_id, items), "has_more": has_more}


def branch_page(session_id: str, position: int) -> dict[str, Any]:
    """The ``messages``, ``runs`` and ``has_more`` of a ``branch_switched`` frame: the shown
    path from ``position`` on, as much of its newest part as a ``session`` frame holds; ``has_more``
    when messages between ``position`` and the first of them were left for
    ``history_before``."""
    limit = max(1, int(conf.ZETT_HISTORY_PAGE))
    items, has_more = _page(
        session_id, before=None, limit=limit, budget=SESSION_FRAME_BUDGET, since=position
    )
    return {"messages": items, "runs": _runs_of(session_id, items), "has_more": has_more}
