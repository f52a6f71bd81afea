"""The admin of people in the loop: feedback (filter by assistant, rating, date) and the
takeovers of a chat (an inline of the chat's page, beside its conversation, where staff
messages show with the role ``staff``)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from agent_app.models import ChatFeedback, ChatTakeover

__all__ = ["SUPPORT_SHOWN", "ChatFeedbackAdmin", "ChatTakeoverInline"]

#: A chat's support fields its admin page shows (read-only; ``needs_human`` is editable).
SUPPORT_SHOWN = ["needs_human_since", "handoff_reason", "taken_over_by", "taken_over_at"]


class ChatTakeoverInline(admin.TabularInline):
    model = ChatTakeover
    ordering = ["started_at"]
    fields = ["staff_name", "staff", "started_at", "ended_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "takeovers by staff"

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ChatFeedback)
class ChatFeedbackAdmin(admin.ModelAdmin):
    list_display = ["__str__", "rating", "assistant", "comment_shown", "person", "updated_at"]
    list_filter = ["assistant", "rating", "updated_at", "created_at"]
    date_hierarchy = "updated_at"
    search_fields = ["comment", "message__content", "person"]
    list_select_related = ["message"]
    raw_id_fields = ["message", "session", "user"]
    readonly_fields = ["created_at", "updated_at"]

    @admin.display(description="comment")
    def comment_shown(self, feedback: ChatFeedback) -> str:
        text = " ".join(feedback.comment.split())
        return text if len(text) <= 80 else text[:79] + "…"
