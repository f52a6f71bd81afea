"""Firing a schedule: claiming a due time (exactly one worker wins it), then its run.

``claim_due(now)`` takes every enabled schedule whose ``next_fire_at`` has come and moves
it to its next due time after ``now`` in one conditional update: ``WHERE pk = … AND
next_fire_at = <the due time read>``. However many workers run this at the same moment
(threads, processes, machines on one database), the update succeeds for one of them; the
others change nothing and fire nothing. That due time is then fired by the winner.

Catch-up after downtime: a schedule whose due times passed while no worker ran fires
once, at once (for the first of them, ``last_fired_at``), and then goes on from the next
due time after now — never a burst of the missed ones.

``start_fire`` starts the claimed run as the schedule's owner, with its assistant, in a
new chat or the schedule's one chat (made at its first run, and made anew if it was
deleted), through ``agent_app.background.start`` like any background run. A run that
cannot start (the owner is gone, the one chat still runs, the budget is spent) is not
retried: the due time is spent and ``last_error`` says why. The claim and the run's start
follow each other at once; a worker that dies between the two (a few milliseconds) loses
that one due time.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.background.start import start_background_run
from agent_app.guard.access import Person
from agent_app.models.cron import BadSchedule, next_after
from agent_app.models.schedules import ScheduledRun

__all__ = ["Fire", "claim_due", "start_fire"]

logger = logging.getLogger(__name__)

#: Schedules one claim reads at most (the rest are read by the next round).
CLAIM_BATCH = 100


@dataclass(frozen=True, slots=True)
class Fire:
    """A due time this worker won, and what its run needs."""

    schedule_id: int
    due: datetime
    assistant: str
    owner_id: int
    prompt: str
    new_chat: bool
    chat_id: str | None


def claim_due(now: datetime, limit: int = CLAIM_BATCH) -> list[Fire]:
    """Claim the due times of every schedule due at ``now``; those this worker won."""
    rows = list(
        ScheduledRun.objects.filter(enabled=True, next_fire_at__lte=now).order_by(
            "next_fire_at", "pk"
        )[:limit]
    )
    fires: list[Fire] = []
    for row in rows:
        due = row.next_fire_at
        assert due is not None
        try:
            following: datetime | None = next_after(row.cron, row.timezone, now)
            problem = ""
        except BadSchedule as bad:  # edited in the database by hand: stop, and say why
            following, problem = None, str(bad)
        won = ScheduledRun.objects.filter(pk=row.pk, enabled=True, next_fire_at=due).update(
            next_fire_at=following,
            last_fired_at=due,
            **({"last_error": problem} if problem else {}),
        )
        if won and not problem:
            fires.append(
                Fire(
                    row.pk,
                    due,
                    row.assistant,
                    row.owner_id,
                    row.prompt,
                    row.new_chat,
                    None if row.chat_id is None else str(row.chat_id),
                )
            )
    return fires


async def start_fire(fire: Fire) -> str | None:
    """Start the run of a claimed due time; its request id (None: it could not start)."""
    user = await database_sync_to_async(_owner)(fire.owner_id)
    if user is None:
        await _record(fire.schedule_id, error="The schedule's owner is gone or inactive")
        return None
    person = Person(user.pk, None)
    chat = fire.chat_id if not fire.new_chat and fire.chat_id else str(uuid.uuid4())
    try:
        try:
            request_id = await _start(person, user, chat, fire)
        except AguiError as refused:
            if fire.new_chat or refused.code is not ErrorCode.NOT_FOUND:
                raise
            chat = str(uuid.uuid4())  # the one chat was deleted: a new one from now on
            request_id = await _start(person, user, chat, fire)
    except AguiError as refused:
        logger.info("Schedule %s could not start its run: %s", fire.schedule_id, refused.message)
        await _record(fire.schedule_id, error=refused.message)
        return None
    await _record(fire.schedule_id, request_id=request_id, chat_id=None if fire.new_chat else chat)
    return request_id


async def _start(person: Person, user: object, chat: str, fire: Fire) -> str:
    return await start_background_run(person, user, chat, fire.prompt, assistant=fire.assistant)


def _owner(owner_id: int) -> object | None:
    user = get_user_model()._default_manager.filter(pk=owner_id).first()
    return user if user is not None and user.is_active else None


@database_sync_to_async
def _record(
    schedule_id: int, *, request_id: str = "", error: str = "", chat_id: str | None = None
) -> None:
    fields: dict[str, object] = {"last_request_id": request_id, "last_error": error}
    if chat_id is not None:
        fields["chat_id"] = chat_id
    ScheduledRun.objects.filter(pk=schedule_id).update(**fields)
