"""Admin: browse sessions with their messages and runs, the messages themselves, the runs and
how they ended, the waits for replies, the external-event audit trail and the attachments
(the example site registers its demo notes itself).
Everything a chat writes is read-only here except titles and owners: editing or
deleting a message would silently rewrite what the agent saw (delete the session instead).

A session's page reads as its conversation (the path it shows, then its other versions):
answers rendered from Markdown (raw HTML in them shown as text, unsafe links left
unlinked), each version of a turn numbered ("2 of 3") and the rows off the shown path
marked, a success mark only on tool results, and an anonymous owner named by the short
form of its browser key."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import models
from django.db.models import Case, Count, Max, QuerySet, When
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from agent_app.budgets import admin as _budgets_admin  # noqa: F401  (registers TokenUsage)
from agent_app.models import (
    ApiToken,
    ChatAttachment,
    ChatMessage,
    ChatRun,
    ChatSession,
    ExternalEventRecord,
    ReplyWait,
    SubRun,
)
from agent_app.people.admin import SUPPORT_SHOWN, ChatTakeoverInline
from agent_app.schedules import admin as _schedules_admin  # noqa: F401  (ScheduledRun)
from agent_app.webhooks import admin as _webhooks_admin  # noqa: F401  (webhooks, deliveries)

#: Characters of message content shown in list columns.
PREVIEW_LENGTH = 80
#: Characters of a message rendered on its session's page; longer ones are cut there.
RENDERED_LENGTH = 4000
#: Characters of an anonymous owner's browser key shown.
BROWSER_KEY_SHOWN = 8

#: CommonMark with tables, raw HTML escaped: markdown-it's link check refuses
#: ``javascript:``, ``vbscript:``, ``file:`` and non-image ``data:`` URLs.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")

#: The admin's own additions: request ids on one line, rendered messages, superseded rows.
ADMIN_CSS = {"all": ["agent_app/admin.css"]}


def _preview(content: object) -> str:
    text = " ".join(_text(content).split())
    return text if len(text) <= PREVIEW_LENGTH else text[: PREVIEW_LENGTH - 1] + "…"


def _calls(message: ChatMessage) -> str:
    """The tool calls of an answer, or the tool a result belongs to."""
    if message.role == "tool":
        return message.name
    return ", ".join(
        str(call.get("name", "?")) for call in message.tool_calls or () if isinstance(call, dict)
    )


def _outcome(message: ChatMessage) -> str:
    """A tool result's success; an empty cell where it does not apply (no "unknown" icon)."""
    if message.role != "tool" or message.success is None:
        return ""
    return "succeeded" if message.success else "failed"


def _text(content: object) -> str:
    if isinstance(content, list):
        return "\n\n".join(
            part.get("text", "[image]") if isinstance(part, dict) else str(part) for part in content
        )
    return str(content or "")


def _rendered(message: ChatMessage) -> SafeString:
    """The message as its reader saw it: Markdown for people's and the agent's words, plain
    text for tool results, marked when a later regeneration or edit replaced it."""
    text = _text(message.content)
    if len(text) > RENDERED_LENGTH:
        text = text[: RENDERED_LENGTH - 1] + "…"
    if message.role == "tool":
        body = format_html('<pre class="zett-tool-result">{}</pre>', text)
    else:
        # markdown-it escapes every character of the text it does not turn into markup.
        body = mark_safe(f'<div class="zett-markdown">{_MARKDOWN.render(text)}</div>')
    if message.superseded:
        return format_html(
            '<div class="zett-superseded"><strong class="zett-superseded__tag">other version'
            "</strong> not on the path the chat shows (an edit or a regeneration made "
            "another){}</div>",
            body,
        )
    return body


def _version(message: ChatMessage) -> str:
    """Which version of its turn a message opens ("2 of 3"); empty for a turn with one."""
    if message.versions < 2:
        return ""
    return f"{message.version} of {message.versions}"


def _owner(session: ChatSession) -> str:
    """The signed-in owner, or the anonymous browser that started the chat."""
    if session.owner_id is not None:
        return str(session.owner)
    if session.browser_key:
        return f"anonymous · {session.browser_key[:BROWSER_KEY_SHOWN]}"
    return "anonymous"


class ChatMessageInline(admin.TabularInline):
    model = ChatMessage
    #: The path the chat shows, in order; then the other versions, each as it was written.
    ordering = [
        "superseded",
        Case(
            When(superseded=False, then="position"),
            default="pk",
            output_field=models.BigIntegerField(),
        ),
    ]
    fields = [
        "position",
        "version_shown",
        "role",
        "content_shown",
        "tool_calls_shown",
        "succeeded",
        "request_id",
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(description="content")
    def content_shown(self, message: ChatMessage) -> SafeString:
        return _rendered(message)

    @admin.display(description="version")
    def version_shown(self, message: ChatMessage) -> str:
        return _version(message)

    @admin.display(description="tool calls")
    def tool_calls_shown(self, message: ChatMessage) -> str:
        return _calls(message)

    @admin.display(description="success")
    def succeeded(self, message: ChatMessage) -> str:
        return _outcome(message)

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ChatRunInline(admin.TabularInline):
    model = ChatRun
    ordering = ["started_at"]
    fields = ["request_id", "status", "kind", "attempts", "started_at", "ended_at", "error_message"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ChatAttachmentInline(admin.TabularInline):
    model = ChatAttachment
    fields = ["name", "media_type", "size", "created_at"]
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
        "owner_shown",
        "assistant",
        "message_count",
        "last_activity",
        "created_at",
    ]
    list_filter = ["assistant", "needs_human", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    search_fields = ["id", "title", "owner__username", "browser_key", "messages__content"]
    # The assistant is fixed when the chat is stored: its history was written with it.
    readonly_fields = ["id", "assistant", "browser", "created_at", "updated_at", *SUPPORT_SHOWN]
    fields = [
        "id",
        "title",
        "owner",
        "browser",
        "assistant",
        "created_at",
        "updated_at",
        "needs_human",  # clear it when the person was helped another way
        *SUPPORT_SHOWN,
    ]
    raw_id_fields = ["owner"]
    inlines = [ChatMessageInline, ChatAttachmentInline, ChatRunInline, ChatTakeoverInline]

    class Media:
        css = ADMIN_CSS

    @admin.display(description="owner", ordering="owner__username")
    def owner_shown(self, session: ChatSession) -> str:
        return _owner(session)

    @admin.display(description="browser key")
    def browser(self, session: ChatSession) -> str:
        key = session.browser_key
        return f"{key[:BROWSER_KEY_SHOWN]}…" if key else ""

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
        "version_shown",
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

    class Media:
        css = ADMIN_CSS

    @admin.display(description="content")
    def content_preview(self, message: ChatMessage) -> str:
        return _preview(message.content)

    @admin.display(description="tool calls")
    def tool_calls_shown(self, message: ChatMessage) -> str:
        return _calls(message)

    @admin.display(description="success", ordering="success")
    def succeeded(self, message: ChatMessage) -> str:
        return _outcome(message)

    @admin.display(description="version")
    def version_shown(self, message: ChatMessage) -> str:
        return _version(message)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ChatRun)
class ChatRunAdmin(admin.ModelAdmin):
    list_display = [
        "request_id",
        "session",
        "status",
        "kind",
        "attempts",
        "started_at",
        "ended_at",
        "worker",
    ]
    list_filter = ["status", "kind", "started_at"]
    search_fields = ["request_id", "resumed_from", "session__id", "session__title", "trace_context"]
    list_select_related = ["session"]
    readonly_fields = [field.name for field in ChatRun._meta.fields]

    class Media:
        css = ADMIN_CSS

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


@admin.register(SubRun)
class SubRunAdmin(admin.ModelAdmin):
    """A delegate's work inside a chat's run (its own conversation; read-only)."""

    list_display = ["parent_tool_call_id", "assistant", "depth", "status", "session", "created_at"]
    list_filter = ["status", "assistant", "created_at"]
    search_fields = ["parent_tool_call_id", "root_tool_call_id", "request_id", "session__id"]
    list_select_related = ["session"]
    readonly_fields = [field.name for field in SubRun._meta.fields]

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


@admin.register(ChatAttachment)
class ChatAttachmentAdmin(admin.ModelAdmin):
    """Files people attached; read-only (a message refers to them). Deleting a row here
    removes its file from storage too."""

    list_display = ["name", "media_type", "size", "session", "uploader", "created_at"]
    list_filter = ["media_type", "created_at"]
    search_fields = ["name", "id", "session__id", "uploader"]
    readonly_fields = [
        "id",
        "session",
        "name",
        "media_type",
        "size",
        "width",
        "height",
        "uploader",
        "file",
        "created_at",
    ]
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


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
        from agent_app.guard.tokens import issue

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
