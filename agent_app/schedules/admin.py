"""The admin's scheduled runs: who, with which assistant, when (cron and time zone), and
how the last run went. Registered from ``agent_app.admin``; saving a schedule whose time
changed computes its next run from now (``ScheduledRun.save``).
"""

from __future__ import annotations

from django.contrib import admin

from agent_app.schedules.models import ScheduledRun

__all__ = ["ScheduledRunAdmin"]


@admin.register(ScheduledRun)
class ScheduledRunAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "assistant",
        "owner",
        "cron",
        "timezone",
        "enabled",
        "next_fire_at",
        "last_fired_at",
        "last_error",
    ]
    list_filter = ["enabled", "assistant", "new_chat"]
    search_fields = ["name", "prompt", "owner__username"]
    raw_id_fields = ["owner"]
    readonly_fields = ["chat", "next_fire_at", "last_fired_at", "last_request_id", "last_error"]
    fields = [
        "name",
        "assistant",
        "owner",
        "prompt",
        "cron",
        "timezone",
        "new_chat",
        "enabled",
        *readonly_fields,
    ]
