"""Versions of a turn: how a chat branches, and which path through it is shown.

The data model. Every message row names the message before it on its path (``follows``, a
primary key), so a chat is a tree, and holds its place on that path (``position``).
Editing a user message or answering it again adds a *version* of its turn: a new user
message that follows the same message at the same position, and what the run then writes
after it. Nothing is deleted; a turn's versions are numbered in the order they were made.

Why a flag on each row for the shown path (``superseded`` False: on it) rather than a
pointer to the chat's current leaf: reading the shown path is what every open, every page
and every run does, and with the flag it is the very query a chat that never branched runs
— the shown rows by position, on a partial unique index of ``(session, position)`` over
shown rows — whatever the number of hidden versions. A leaf pointer would make each of
those reads walk the tree. The cost moves to the rare writes, which touch only the
switched part of the path, in one transaction: a new version hides the shown path from its
turn on (``start_version``), a switch hides it and shows the other version's path
(``switch_version``). Each row also keeps whether it is the version a path through its
turn shows (``chosen``), so switching back to an earlier version shows what was shown
below it then, and its number and its turn's count (``version``, ``versions``, on every
version), so a page of history says "2 of 3" with no query of its own.

Every function here is synchronous ORM code; the caller runs it through
``database_sync_to_async``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Case, F, QuerySet, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from agent_app.durable.store import bump_version, forget
from agent_app.models import ChatMessage, ChatSession

__all__ = ["BranchBusy", "NotATurn", "Switched", "reveal", "start_version", "switch_version"]


class NotATurn(ValueError):
    """A position or index that names no turn or version of the shown path."""


class BranchBusy(Exception):
    """A run of the session is going on or waits for a reply: its path may not change."""


@dataclass(frozen=True, slots=True)
class Switched:
    """What a switch shows: the turn's user message position, the version, of how many."""

    position: int
    index: int
    count: int


def _shown(session_id: str) -> QuerySet[ChatMessage]:
    return ChatMessage.objects.filter(session_id=session_id, superseded=False)


def _turn_at(session_id: str, position: int | None) -> ChatMessage:
    """The shown user message at ``position`` (None: the last turn's), or ``NotATurn``."""
    shown = _shown(session_id)
    if position is None:
        row = shown.filter(role="user", steering=False).order_by("-position").first()
        if row is None:
            raise NotATurn("There is no message to answer again in this chat yet")
        return row
    row = shown.filter(position=position).first()
    if row is None:
        raise NotATurn(f"There is no message at position {position} of this chat")
    if row.role != "user":
        raise NotATurn(
            f"The message at position {position} is not a user message ({row.role}); "
            "name the position of the turn's user message"
        )
    return row


def _versions_of(session_id: str, row: ChatMessage) -> QuerySet[ChatMessage]:
    """The versions of ``row``'s turn: the messages that follow what it follows."""
    return ChatMessage.objects.filter(
        session_id=session_id, position=row.position, follows=row.follows
    )


def start_version(session_id: str, position: int | None) -> tuple[ChatMessage, int]:
    """Make room for a new version of the turn at ``position`` (None: the last turn).

    Called in the transaction that stores the new version, holding the session's lock:
    hides the shown path from that turn on and counts the new version in. Returns the
    turn's shown user message (whose place and predecessor the new one takes) and the new
    version's number. ``NotATurn`` (nothing written) if ``position`` names no user message
    of the shown path.
    """
    row = _turn_at(session_id, position)
    versions = _versions_of(session_id, row)
    number = versions.count() + 1
    versions.update(chosen=False, versions=number)
    _shown(session_id).filter(position__gte=row.position).update(superseded=True)
    return row, number


def switch_version(session_id: str, position: int, index: int, *, seq: int) -> Switched:
    """Show version ``index`` (1-based) of the turn at ``position``: one transaction.

    The shown path from ``position`` on is hidden and the version's path shown (below it,
    at each later turn, the version shown there last). ``seq`` is the number of the
    frame that announces the switch: the session's last ``seq`` from now on. ``NotATurn``
    or ``BranchBusy`` change nothing.
    """
    with transaction.atomic():
        try:
            bumped = bump_version(session_id, timezone.now(), count_unsettled=True)
        except ChatSession.DoesNotExist:
            raise NotATurn(f"There is no message at position {position} of this chat") from None
        if bumped.unsettled_runs:
            raise BranchBusy(session_id)
        row = _turn_at(session_id, position)
        ids = list(_versions_of(session_id, row).order_by("pk").values_list("pk", flat=True))
        if not 1 <= index <= len(ids):
            raise NotATurn(
                f"The turn at position {position} has {len(ids)} "
                f"version{'s' if len(ids) != 1 else ''}; index must be 1 to {len(ids)}"
            )
        target = ids[index - 1]
        if target != row.pk:
            _choose(ids, target)
            _show_from(session_id, target, position)
        ChatSession.objects.filter(pk=session_id).update(
            last_event_seq=Greatest(F("last_event_seq"), Value(seq))
        )
    forget(session_id)
    return Switched(position, index, len(ids))


def reveal(session_id: str, message_id: int) -> int | None:
    """Show the path through message ``message_id`` (a search found it in a version that
    is not shown): one transaction. Returns the position from which the shown path
    changed (None: it was shown already, or is no message of the session).
    ``BranchBusy`` (nothing changes) while a run goes on or waits."""
    with transaction.atomic():
        bumped = bump_version(session_id, timezone.now(), count_unsettled=True)
        if bumped.unsettled_runs:
            raise BranchBusy(session_id)
        rows = {
            pk: (follows, position, superseded)
            for pk, follows, position, superseded in ChatMessage.objects.filter(
                session_id=session_id
            ).values_list("pk", "follows", "position", "superseded")
        }
        if message_id not in rows or not rows[message_id][2]:
            return None
        top = message_id
        while (above := rows[top][0]) is not None and above in rows and rows[above][2]:
            _choose_among_versions(session_id, top, rows[top])
            top = above
        _choose_among_versions(session_id, top, rows[top])
        position = rows[top][1]
        _show_from(session_id, top, position)
    forget(session_id)
    return position


def _choose_among_versions(session_id: str, pk: int, row: tuple[int | None, int, bool]) -> None:
    follows, position, _ = row
    ids = ChatMessage.objects.filter(session_id=session_id, position=position, follows=follows)
    _choose(list(ids.values_list("pk", flat=True)), pk)


def _choose(ids: list[int], chosen: int) -> None:
    """Of the versions ``ids`` of a turn, paths through it show ``chosen``."""
    ChatMessage.objects.filter(pk__in=ids).update(
        chosen=Case(When(pk=chosen, then=Value(True)), default=Value(False))
    )


def _show_from(session_id: str, start: int, position: int) -> None:
    """Hide the shown path from ``position`` on and show the path down from ``start``."""
    path = _path_from(session_id, start, position)
    _shown(session_id).filter(position__gte=position).update(superseded=True)
    for first in range(0, len(path), 500):
        ChatMessage.objects.filter(pk__in=path[first : first + 500]).update(superseded=False)


def _path_from(session_id: str, start: int, position: int) -> list[int]:
    """The primary keys of the path down from ``start`` (at ``position``), in order.

    One read of the ids below ``position`` (every version's), then a walk: at each row the
    next is its chosen follower, else its newest one.
    """
    followers: dict[int, list[tuple[int, bool]]] = {}
    below = ChatMessage.objects.filter(session_id=session_id, position__gt=position)
    for pk, follows, chosen in below.order_by("pk").values_list("pk", "follows", "chosen"):
        followers.setdefault(follows, []).append((pk, chosen))
    path = [start]
    while nexts := followers.get(path[-1]):
        chosen = [pk for pk, is_chosen in nexts if is_chosen]
        path.append(chosen[-1] if chosen else nexts[-1][0])
    return path
