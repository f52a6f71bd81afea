"""``ScheduledRun`` rows (registered by ``agent_app.models``).

``next_fire_at`` is the next due time (UTC); a worker fires it by moving it to the due
time after now in one conditional update (``agent_app.schedules.firing``), so each due
time is fired by exactly one worker however many try. Saving a schedule whose cron
expression, time zone or switch changed computes it afresh from now.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from agent_app.models.cron import BadSchedule, check_cron, next_after, zone
from agent_app.protocol.frames import MAX_CONTENT_BYTES


class ScheduledRun(models.Model):
    """A prompt run for ``owner`` with ``assistant`` at each due time of ``cron``."""

    name = models.CharField(max_length=200, blank=True)
    assistant = models.CharField(max_length=64)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="zett_schedules"
    )
    prompt = models.TextField()
    cron = models.CharField(max_length=100, help_text="minute hour day month weekday")
    timezone = models.CharField(max_length=64, default="UTC", help_text="An IANA name")
    #: A new chat for each run; else every run goes to one chat (``chat``).
    new_chat = models.BooleanField(default=True)
    chat = models.ForeignKey(
        "agent_app.ChatSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    enabled = models.BooleanField(default=True)
    next_fire_at = models.DateTimeField(null=True, blank=True, db_index=True)
    #: The due time last fired, the run it started, and why it could not start.
    last_fired_at = models.DateTimeField(null=True, blank=True)
    last_request_id = models.CharField(max_length=64, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        verbose_name = "scheduled run"

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any) -> ScheduledRun:
        row = super().from_db(db, field_names, values)
        row._when = (row.cron, row.timezone, row.enabled)  # type: ignore[attr-defined]
        return row

    def clean(self) -> None:
        """Check the time and the prompt (the assistant is checked where it is chosen:
        ``agent_app.schedules.checks.check_assistant``)."""
        errors: dict[str, str] = {}
        try:
            self.cron = check_cron(self.cron)
        except BadSchedule as bad:
            errors["cron"] = str(bad)
        try:
            zone(self.timezone)
        except BadSchedule as bad:
            errors["timezone"] = str(bad)
        if not self.prompt.strip():
            errors["prompt"] = "A schedule needs a prompt"
        elif len(self.prompt.encode("utf-8")) > MAX_CONTENT_BYTES:
            errors["prompt"] = f"A prompt is at most {MAX_CONTENT_BYTES} bytes, as a message is"
        if errors:
            raise ValidationError(errors)

    def save(self, *args: Any, **kwargs: Any) -> None:
        when = (self.cron, self.timezone, self.enabled)
        if kwargs.get("update_fields") is None and getattr(self, "_when", None) != when:
            self.next_fire_at = (
                next_after(self.cron, self.timezone, timezone.now()) if self.enabled else None
            )
        super().save(*args, **kwargs)
        self._when = when

    def __str__(self) -> str:
        return self.name or f"{self.assistant} at {self.cron} ({self.timezone})"
