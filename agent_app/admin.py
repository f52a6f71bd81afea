"""Admin: browse sessions with their messages, the messages themselves, the external-event
audit trail and the demo notes. Everything a chat writes is read-only here except titles,
owners and notes: editing a message would silently rewrite what the agent saw."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest

from agent_app.models import ChatMessage, ChatSession, ExternalEventRecord, Note

#: Characters of message content shown in list columns.
PREVIEW_LENGTH = 80


def _preview(content: object) -> str:
    if isinstance(content, list):
        text = " ".join(
            part.get("text", "[image]") if isinstance(part, dict) else str(part) for part in content
        )
    else:
        text = str(content or "")
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_LENGTH else text[: PREVIEW_LENGTH - 1] + "…"


class ChatMessageInline(admin.TabularInline):
    model = ChatMessage
    ordering = ["position"]
    fields = ["position", "role", "content_preview", "name", "success", "request_id"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(description="content")
    def content_preview(self, message: ChatMessage) -> str:
        return _preview(message.content)

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ChatSession)
class ChatSessionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "owner", "message_count", "last_activity", "created_at"]
    list_filter = ["created_at", "updated_at"]
    date_hierarchy = "created_at"
    search_fields = ["id", "title", "owner__username", "messages__content"]
    readonly_fields = ["id", "created_at", "updated_at"]
    fields = ["id", "title", "owner", "created_at", "updated_at"]
    raw_id_fields = ["owner"]
    inlines = [ChatMessageInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChatSession]:
        return (
            super()
            .get_queryset(request)
            .select_related("owner")
            .annotate(
                message_count=Count("messages", distinct=True),
                last_message_at=Max("messages__created_at"),
            )
        )

    @admin.display(description="messages", ordering="message_count")
    def message_count(self, session: ChatSession) -> int:
        return session.message_count

    @admin.display(description="last activity", ordering="updated_at")
    def last_activity(self, session: ChatSession):
        return max(filter(None, [session.last_message_at, session.updated_at]))


@admin.register(ChatMessage)
class ChatMessageAdmin(admin.ModelAdmin):
    list_display = ["session", "position", "role", "content_preview", "name", "created_at"]
    list_filter = ["role", "success", "created_at"]
    search_fields = ["content", "reasoning", "name", "session__title", "request_id"]
    list_select_related = ["session"]
    raw_id_fields = ["session"]
    readonly_fields = [field.name for field in ChatMessage._meta.fields]

    @admin.display(description="content")
    def content_preview(self, message: ChatMessage) -> str:
        return _preview(message.content)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class VerdictFilter(admin.SimpleListFilter):
    """Accepted (some extension claimed the event) or rejected (nobody did)."""

    title = "verdict"
    parameter_name = "verdict"

    def lookups(self, request, model_admin):
        return [("accepted", "accepted"), ("rejected", "rejected")]

    def queryset(self, request, queryset):
        if self.value() == "accepted":
            return queryset.exclude(accepted_by=[])
        if self.value() == "rejected":
            return queryset.filter(accepted_by=[])
        return queryset


@admin.register(ExternalEventRecord)
class ExternalEventRecordAdmin(admin.ModelAdmin):
    list_display = ["name", "verdict", "received_at", "session", "request_id"]
    list_filter = [
        VerdictFilter,
        "name",
        "received_at",
        ("session", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["name", "request_id", "session__id", "session__title"]
    list_select_related = ["session"]
    readonly_fields = [field.name for field in ExternalEventRecord._meta.fields]

    @admin.display(description="verdict", boolean=False)
    def verdict(self, record: ExternalEventRecord) -> str:
        return "accepted by " + ", ".join(record.accepted_by) if record.accepted else "rejected"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ["title", "session", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["title", "text"]
    raw_id_fields = ["session"]
