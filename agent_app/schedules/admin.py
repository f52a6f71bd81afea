"""The admin's scheduled runs: who, with which assistant, when (cron and time zone), and
how the last run went. Registered from ``agent_app.admin``; saving a schedule whose time
changed computes its next run from now (``ScheduledRun.save``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from agent_app.models.schedules import ScheduledRun
from agent_app.schedules.checks import check_assistant

__all__ = ["ScheduledRunAdmin"]


class ScheduledRunForm(forms.ModelForm):
    class Meta:
        model = ScheduledRun
        fields = "__all__"

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("assistant"):
            try:
                check_assistant(data["assistant"], data.get("owner"))
            except ValidationError as bad:
                self.add_error("assistant", bad)
        return data


@admin.register(ScheduledRun)
class ScheduledRunAdmin(admin.ModelAdmin):
    form = ScheduledRunForm
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
