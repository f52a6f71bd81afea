"""When the team answers: ``ZETT_SUPPORT_HOURS``, shown to a person who asked for one."""

from __future__ import annotations

from agent_app import conf

__all__ = ["support_hours_text"]


def support_hours_text() -> str | None:
    """The site's words for its support hours ("Mon-Fri, 9:00-17:00 CET"), or None."""
    hours = conf.ZETT_SUPPORT_HOURS
    return hours.strip() or None if isinstance(hours, str) else None
