"""Cron expressions in a time zone, read by ``cronsim`` (a well-kept parser, not ours).

Five fields (minute, hour, day of month, month, day of week; names like ``MON`` and
``JAN``, ``L`` for the last day, ``*/15`` steps), evaluated in the schedule's IANA time
zone (``zoneinfo``). Around daylight-saving changes ``cronsim`` does what Debian's cron
does for a job at a fixed time: a time that does not exist that day (02:30 when clocks
jump from 02:00 to 03:00) runs at the first minute after the jump, and a time that
happens twice (01:30 when clocks go back) runs once, the first time. Times are stored
and compared in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = ["BadSchedule", "check_cron", "next_after", "zone"]


class BadSchedule(ValueError):
    """A cron expression or time zone that cannot be used (the message says why)."""


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``BadSchedule`` if there is none)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadSchedule(
            f"Unknown time zone {name!r} (an IANA name, e.g. Europe/Berlin)"
        ) from None


def check_cron(expression: str) -> str:
    """``expression`` tidied (one space between fields), or ``BadSchedule``."""
    fields = expression.split()
    if len(fields) != 5:
        raise BadSchedule(
            f"A cron expression has 5 fields (minute hour day month weekday), got {len(fields)}"
        )
    tidy = " ".join(fields)
    try:
        CronSim(tidy, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as bad:
        raise BadSchedule(f"Bad cron expression {tidy!r}: {bad}") from None
    return tidy


def next_after(expression: str, time_zone: str, moment: datetime) -> datetime:
    """The first due time strictly after ``moment``, in UTC."""
    local = moment.astimezone(zone(time_zone))
    due = next(iter(CronSim(expression, local)))
    if due.tzinfo is None:  # pragma: no cover - cronsim keeps the zone it was given
        due = due.replace(tzinfo=local.tzinfo)
    return due.astimezone(UTC)
