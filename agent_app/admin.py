"""Admin: browse sessions with their messages and runs, the messages themselves, the runs and
how they ended, the waits for replies, the external-event audit trail and the demo notes.
Everything a chat writes is read-only here except titles, owners and notes: editing or
deleting a message would silently rewrite what the agent saw (delete the session instead)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest

from agent_app.models import (
    ApiToken,
    ChatMessage,
    ChatRun,
    ChatSession,
    ExternalEventRecord,
    Note,
    ReplyWait,
)

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


def _calls(message: ChatMessage) -> str:
    """The tool calls of an answer, or the tool a result belongs to."""
    if message.role == "tool":
        return message.name
    return ", ".join(
        str(call.get("name", "?")) for call in message.tool_calls or () if isinstance(call, dict)
    )


def _outcome(message: ChatMessage) -> bool | None:
    """A tool result's success; None (an empty cell) where it does not apply."""
    return message.success if message.role == "tool" else None


class ChatMessageInline(admin.TabularInline):
    model = ChatMessage
    ordering = ["position"]
    fields = ["position", "role", "content_preview", "tool_calls_shown", "succeeded", "request_id"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(description="content")
    def content_preview(self, message: ChatMessage) -> str:
        return _preview(message.content)

    @admin.display(description="tool calls")
    def tool_calls_shown(self, message: ChatMessage) -> str:
        return _calls(message)

    @admin.display(description="success", boolean=True)
    def succeeded(self, message: ChatMessage) -> bool | None:
        return _outcome(message)

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ChatRunInline(admin.TabularInline):
    model = ChatRun
    ordering = ["started_at"]
    fields = ["request_id", "status", "kind", "started_at", "ended_at", "error_message"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ChatSession)
class ChatSessionAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "owner",
        "assistant",
        "message_count",
        "last_activity",
        "created_at",
    ]
    list_filter = ["assistant", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    search_fields = ["id", "title", "owner__username", "messages__content"]
    # The assistant is fixed when the chat is stored: its history was written with it.
    readonly_fields = ["id", "assistant", "created_at", "updated_at"]
    fields = ["id", "title", "owner", "assistant", "created_at", "updated_at"]
    raw_id_fields = ["owner"]
    inlines = [ChatMessageInline, ChatRunInline]

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
    list_display = [
        "session",
        "position",
        "role",
        "content_preview",
        "tool_calls_shown",
        "succeeded",
        "superseded",
        "created_at",
    ]
    list_filter = ["role", "success", "steering", "partial", "superseded", "created_at"]
    search_fields = ["content", "reasoning", "name", "session__title", "request_id"]
    list_select_related = ["session"]
    raw_id_fields = ["session"]
    readonly_fields = [field.name for field in ChatMessage._meta.fields]
    #: Messages of one session together, in conversation order.
    ordering = ["session", "position"]

    @admin.display(description="content")
    def content_preview(self, message: ChatMessage) -> str:
        return _preview(message.content)

    @admin.display(description="tool calls")
    def tool_calls_shown(self, message: ChatMessage) -> str:
        return _calls(message)

    @admin.display(description="success", boolean=True, ordering="success")
    def succeeded(self, message: ChatMessage) -> bool | None:
        return _outcome(message)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ChatRun)
class ChatRunAdmin(admin.ModelAdmin):
    list_display = ["request_id", "session", "status", "kind", "started_at", "ended_at", "worker"]
    list_filter = ["status", "kind", "started_at"]
    search_fields = ["request_id", "resumed_from", "session__id", "session__title"]
    list_select_related = ["session"]
    readonly_fields = [field.name for field in ChatRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ReplyWait)
class ReplyWaitAdmin(admin.ModelAdmin):
    list_display = ["tool_call_id", "kind", "tool_name", "status", "session", "expires_at"]
    list_filter = ["status", "kind", "created_at"]
    search_fields = ["tool_call_id", "request_id", "session__id"]
    list_select_related = ["session"]
    readonly_fields = [field.name for field in ReplyWait._meta.fields]

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


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens of programs. Adding one shows its secret once; only its hash is stored."""

    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "expires_at", "revoked"]
    list_filter = ["revoked", "created_at"]
    search_fields = ["name", "prefix", "user__username"]
    raw_id_fields = ["user"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    fields = ["user", "name", "expires_at", "revoked", "prefix", "created_at", "last_used_at"]

    def save_model(self, request: HttpRequest, obj: ApiToken, form: object, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        from agent_app.tokens import issue

        token, secret = issue(obj.user, name=obj.name)
        if obj.expires_at is not None or obj.revoked:
            ApiToken.objects.filter(pk=token.pk).update(
                expires_at=obj.expires_at, revoked=obj.revoked
            )
        obj.pk = token.pk
        obj.refresh_from_db()
        self.message_user(
            request,
            f"The secret of this token, shown only now: {secret}",
            level=messages.WARNING,
        )
