"""The admin's webhooks: each URL with its events and secret, and every delivery's log.

Registered from ``agent_app.admin``. A webhook's form checks its URL as ``clean`` does (no
private address unless ``ZETT_WEBHOOK_ALLOW_PRIVATE``) and offers the events as
checkboxes. Deliveries are read-only (they are what was sent); the action "Send again
now" puts chosen ones back in the outbox, with the same ``webhook-id``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from agent_app.models.webhooks import (
    EVENT_TYPES,
    DeliveryStatus,
    Webhook,
    WebhookDelivery,
)

__all__ = ["WebhookAdmin", "WebhookDeliveryAdmin"]


class WebhookForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    events = forms.MultipleChoiceField(
        choices=[(event, event) for event in EVENT_TYPES], widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = Webhook
        fields = ["url", "events", "active", "description", "secret"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["events"] = self.instance.event_list

    def clean_events(self) -> list[str]:
        return list(self.cleaned_data["events"])


class DeliveryInline(admin.TabularInline):
    model = WebhookDelivery
    fields = ["created_at", "event_type", "message_id", "status", "attempts", "last_status"]
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    ordering = ["-created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookDelivery]:
        return super().get_queryset(request).order_by("-created_at")


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ["url", "event_names", "active", "description", "created_at"]
    list_filter = ["active"]
    search_fields = ["url", "description"]
    inlines = [DeliveryInline]

    @admin.display(description="events")
    def event_names(self, hook: Webhook) -> str:
        return ", ".join(hook.event_list)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "created_at",
        "event_type",
        "webhook",
        "status",
        "attempts",
        "last_status",
        "next_attempt_at",
        "delivered_at",
    ]
    list_filter = ["status", "event_type"]
    search_fields = ["message_id", "body"]
    date_hierarchy = "created_at"
    actions = ["send_again"]
    readonly_fields = [
        "webhook",
        "message_id",
        "event_type",
        "body",
        "created_at",
        "status",
        "attempts",
        "next_attempt_at",
        "delivered_at",
        "last_status",
        "last_error",
        "log",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Send again now (same webhook-id)")
    def send_again(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        count = queryset.update(status=DeliveryStatus.PENDING, next_attempt_at=timezone.now())
        self.message_user(request, f"{count} deliveries will be sent again.", messages.SUCCESS)
