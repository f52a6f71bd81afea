"""What a chat leaves in the database: sessions, messages, runs, waits, replies.

A ``ChatMessage`` row is one runtime message: the columns hold what the admin searches and
filters on, ``extra`` keeps every other field of the serialised message, so a row turns
back into exactly the message that was saved (see ``agent_app.durable.persistence``).

A ``ChatRun`` row is one request (one press of Send, or the continuation of a paused one):
it is written before the model is called and says how the request ended, so the history
can show what happened even when the process that ran it died. A ``ReplyWait`` row is a
question or approval the agent is waiting for; it is written before the user sees the
widget, so it survives restarts and can be answered from any worker.

The tables of schedules and webhooks are modules of this package too (``schedules``,
``webhooks``, with what checks their rows: ``cron``, ``addresses``), and so are the
single statements every layer above writes with (``statements``).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from zett_agent.messages import MessageRole

#: The ``ChatMessage.role`` of what a member of staff wrote in a chat they took over.
STAFF_ROLE = "staff"


class ChatSession(models.Model):
    """One conversation; its id is the agent's session id and the socket's URL part.

    A session belongs to a signed-in ``owner``, or, for anonymous visitors, to the browser
    session that created it (``browser_key``, a random id kept in the Django session). It
    is never public: see ``agent_app.guard.access``.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=200, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="chat_sessions",
    )
    #: The id of the assistant the chat talks to (``agent_app.assistants``), fixed when the
    #: chat is stored; empty on rows written by code that named none: the default.
    assistant = models.CharField(max_length=64, blank=True, default="")
    #: The anonymous browser that created the session (empty once a user owns it).
    browser_key = models.CharField(max_length=64, blank=True, db_index=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    #: The last ``seq`` a finished run sent: the ``last_seq`` of a session nobody runs.
    last_event_seq = models.PositiveBigIntegerField(default=0, editable=False)
    #: Every ``seq`` up to this one may have been sent: a process that starts numbering a
    #: session's frames reserves a block above it first, so ``seq`` never goes backwards,
    #: across crashes and processes (``agent_app.durable.sequence``).
    seq_reserved = models.PositiveBigIntegerField(default=0, editable=False)
    #: Bumped by every write to the session's messages, in the same transaction: a process
    #: that keeps the rows in memory knows with one primary-key read whether they changed.
    history_version = models.PositiveBigIntegerField(default=0, editable=False)
    #: Tokens the session's runs used, summed as each run ends.
    input_tokens = models.PositiveBigIntegerField(default=0, editable=False)
    output_tokens = models.PositiveBigIntegerField(default=0, editable=False)
    #: Someone asked for a person (the customer, or the assistant's ``handoff_to_human``)
    #: and no member of staff has taken the chat over since (``agent_app.people``).
    needs_human = models.BooleanField(default=False, db_index=True)
    needs_human_since = models.DateTimeField(null=True, blank=True)
    handoff_reason = models.CharField(max_length=500, blank=True)
    #: The member of staff answering in the chat; while set, no run starts.
    taken_over_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="zett_taken_over_chats",
    )
    taken_over_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        #: ``agent_app.staff_chat``: the inbox, any chat's socket, taking chats over.
        permissions = [("staff_chat", "Can answer chats as staff (inbox, takeover)")]

    def __str__(self) -> str:
        return self.title or f"Session {str(self.id)[:8]}"


def attachment_path(instance: ChatAttachment, filename: str) -> str:
    """Where an attachment's bytes are stored: named by the app, never by the uploader."""
    return f"zett-attachments/{instance.session_id}/{instance.pk}"


class ChatAttachment(models.Model):
    """A file attached to a chat, stored through ``STORAGES["default"]``.

    Messages refer to it by id (``UserMessage.attributes["attachments"]``) and never hold
    its bytes. It belongs to its chat: deleted with it, and its file with it
    (``agent_app.attachments.stored``). ``uploader`` names the person
    (``Person.key``) for the daily quota.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="attachments")
    uploader = models.CharField(max_length=100, editable=False)
    #: The sanitised name the person gave the file (``agent_app.attachments.names``).
    name = models.CharField(max_length=200)
    #: The type sniffed from the bytes, never the client's claim.
    media_type = models.CharField(max_length=100, editable=False)
    size = models.PositiveBigIntegerField(editable=False)
    width = models.PositiveIntegerField(null=True, blank=True, editable=False)
    height = models.PositiveIntegerField(null=True, blank=True, editable=False)
    file = models.FileField(upload_to=attachment_path, max_length=300, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["uploader", "created_at"], name="attachment_uploader_time")]

    def __str__(self) -> str:
        return f"{self.name} ({self.media_type})"


class ChatCreation(models.Model):
    """Every chat ever stored, kept after the chat is deleted (``agent_app.durable.chat_records``).

    The chats-per-hour quota counts these rows, so deleting chats gives no quota back; and
    ``deleted_at`` marks an id that is never stored again (another tab's next message must
    not bring a deleted chat back).
    """

    session_id = models.UUIDField(primary_key=True)
    #: Who created it: ``agent_app.guard.access.Person.key`` (``user:<pk>`` or ``browser:<id>``).
    creator = models.CharField(max_length=100)
    created_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["creator", "created_at"], name="creation_creator_time")]

    def __str__(self) -> str:
        return f"Chat {str(self.session_id)[:8]} by {self.creator}"


class ChatMessage(models.Model):
    """One persisted message of a session, at its position in the conversation."""

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    request_id = models.CharField(max_length=64, blank=True, db_index=True)
    role = models.CharField(
        max_length=16,
        choices=[(role.value, role.name.title()) for role in MessageRole] + [(STAFF_ROLE, "Staff")],
    )
    #: A string, or a list of content parts (text and images) as serialised by zett_agent.
    content = models.JSONField(default=str, blank=True)
    reasoning = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=255, blank=True)
    #: The tool's name on a tool result.
    name = models.CharField(max_length=255, blank=True)
    #: Whether a tool result succeeded; null for other roles.
    success = models.BooleanField(null=True, blank=True)
    #: Token usage of the model call that produced an assistant message.
    usage = models.JSONField(null=True, blank=True)
    #: A user message sent with ``steer`` while a run was going (not a new request).
    steering = models.BooleanField(default=False)
    #: An answer the user stopped while it streamed: the text so far, kept and sent to
    #: the model later like any answer.
    partial = models.BooleanField(default=False)
    #: Why the model stopped abnormally (``max_tokens``, ``content_filter`` …): the answer
    #: was cut off. Empty for answers that ended normally.
    stop_reason = models.CharField(max_length=32, blank=True)
    #: Off the chat's shown path: on another version of a turn (an edited message, a
    #: regenerated answer). Kept whole, never sent to the model while it is not shown;
    #: switching versions (``agent_app.durable.branches``) flips it.
    superseded = models.BooleanField(default=False)
    #: The primary key of the message before this one on its path (None: the first).
    #: The versions of a turn are the user messages that follow the same message.
    follows = models.BigIntegerField(null=True, blank=True, editable=False)
    #: This message's number among the versions of its turn (1-based, in creation order)
    #: and how many versions the turn has (kept on every version, so a page of history
    #: names them without a query of its own).
    version = models.PositiveIntegerField(default=1, editable=False)
    versions = models.PositiveIntegerField(default=1, editable=False)
    #: Of the versions of its turn, the one a path through here shows: a switch further up
    #: comes back to what was shown below.
    chosen = models.BooleanField(default=True, editable=False)
    #: The rest of the serialised message (attributes, provider, model …).
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            # ``position`` is a message's place on its path: the versions of a turn share
            # it, the shown path holds each position once.
            models.UniqueConstraint(
                fields=["session", "position"],
                condition=Q(superseded=False),
                name="unique_shown_position_per_session",
            )
        ]
        indexes = [models.Index(fields=["session", "follows"], name="message_session_follows")]

    def __str__(self) -> str:
        return f"#{self.position} {self.role}"


class RunStatus(models.TextChoices):
    """How a request stands or ended (docs/protocol.md lists what each means to a user)."""

    RUNNING = "running", "running"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"
    #: Its process died (crash, kill, lost lease) while it ran.
    INTERRUPTED = "interrupted", "interrupted"
    #: Its process ended while it waited for a reply that can still be given.
    PAUSED = "paused", "paused"
    #: A paused run that a continuation run took over (see ``ChatRun.resumed_from``).
    RESUMED = "resumed", "resumed"
    #: A paused run whose waits passed their deadline before anyone answered.
    EXPIRED = "expired", "expired"
    #: Its person's daily token budget ran out: it made no further model call
    #: (``agent_app.budgets``).
    BUDGET_EXCEEDED = "budget_exceeded", "budget exceeded"


class RunKind(models.TextChoices):
    """What started a run."""

    MESSAGE = "message", "message"
    REGENERATE = "regenerate", "regenerate"
    EDIT = "edit", "edit"
    RESUME = "resume", "resume"


class ChatRun(models.Model):
    """One request of a session and how it ended."""

    request_id = models.CharField(max_length=64, unique=True)
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING, db_index=True
    )
    kind = models.CharField(max_length=16, choices=RunKind.choices, default=RunKind.MESSAGE)
    #: The request this one continues (a reply to a paused run's question or approval).
    resumed_from = models.CharField(max_length=64, blank=True)
    #: The worker process that ran it (its boot id), for the admin and the logs.
    worker = models.CharField(max_length=100, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    #: Exception class name of a failed run.
    error_type = models.CharField(max_length=200, blank=True)
    #: What the user is told about a failure or interruption: never database or provider
    #: internals (those go to the log).
    error_message = models.TextField(blank=True)
    #: Token usage summed over the run's model calls.
    usage = models.JSONField(null=True, blank=True)
    #: The W3C traceparent of the run's span (with tracing on): a continuation run on any
    #: worker links to it, and its waits' spans are its children.
    trace_context = models.CharField(max_length=64, blank=True)
    #: How many workers ran it: 1, plus one for each continuation after its worker died
    #: (``agent_app.durable.continuation``).
    attempts = models.PositiveSmallIntegerField(default=1)
    #: The last call this run started of a tool that must not run twice (neither
    #: ``idempotent`` nor ``atomic``): if the run's worker dies before its result is stored,
    #: the continuation closes it as "may or may not have completed" instead of running it.
    started_call = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["session", "status"], name="run_session_status")]

    def __str__(self) -> str:
        return f"{self.request_id} ({self.status})"


class WaitKind(models.TextChoices):
    #: A question: the ``ask_user`` tool's, or an MCP server's during a tool call
    #: (``agent_app.agents.elicitation``; its payload says ``source: "mcp"``).
    ASK_USER = "ask_user", "question"
    APPROVAL = "approval", "approval"
    #: A host-page tool's call (``agent_app.agents.browser_tools``): a page answers it.
    BROWSER_TOOL = "browser_tool", "browser tool"


class WaitStatus(models.TextChoices):
    """A wait is answered exactly once; a tool it gates runs at most once."""

    OPEN = "open", "open"
    #: A reply was accepted and recorded; the tool has not started yet.
    ANSWERED = "answered", "answered"
    #: An approved tool started: after a crash it is never run again.
    EXECUTING = "executing", "executing"
    DONE = "done", "done"
    EXPIRED = "expired", "expired"
    CANCELLED = "cancelled", "cancelled"


class ReplyWait(models.Model):
    """A question or approval shown to the user, waiting for (or holding) their reply."""

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="waits")
    #: The run that was waiting when the wait was (last) started.
    request_id = models.CharField(max_length=64)
    tool_call_id = models.CharField(max_length=255)
    tool_name = models.CharField(max_length=255)
    kind = models.CharField(max_length=16, choices=WaitKind.choices)
    #: The ``custom`` event's ``name`` and the ``external_event`` name that answers it.
    event_name = models.CharField(max_length=255)
    response_event = models.CharField(max_length=255)
    #: The event payload the user was shown.
    payload = models.JSONField(default=dict)
    #: For approvals: digest of the tool name and arguments the user was shown.
    digest = models.CharField(max_length=64, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=WaitStatus.choices, default=WaitStatus.OPEN, db_index=True
    )
    #: The accepted reply's payload.
    reply = models.JSONField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "tool_call_id"],
                condition=Q(status__in=["open", "answered", "executing"]),
                name="one_live_wait_per_call",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.tool_call_id} ({self.status})"


class SubRunStatus(models.TextChoices):
    RUNNING = "running", "running"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed"


class SubRun(models.Model):
    """A delegate's work inside a chat's run: the assistant an ``ask_<id>`` call asked, and
    its own conversation (``agent_app.agents.subruns``), kept so that a sub-run waiting
    for a reply outlives its process and its finished answer is never asked for twice."""

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="sub_runs")
    #: The ``ask_<id>`` call that runs it (a call of the chat's run, or of another sub-run).
    parent_tool_call_id = models.CharField(max_length=255)
    #: The call of the chat's own run it is part of (its own parent at the first level).
    root_tool_call_id = models.CharField(max_length=255)
    assistant = models.CharField(max_length=64)
    #: The chat's run that last ran it.
    request_id = models.CharField(max_length=64)
    #: 1 for a sub-run of the chat's run, 2 for one of a sub-run, and so on.
    depth = models.PositiveSmallIntegerField(default=1)
    #: Its conversation, as ``zett_agent.serialization.message_to_dict`` writes messages.
    messages = models.JSONField(default=list)
    status = models.CharField(
        max_length=16, choices=SubRunStatus.choices, default=SubRunStatus.RUNNING
    )
    #: Its final answer, once it has one (the ``ask_<id>`` call's result).
    answer = models.TextField(blank=True)
    #: The last call it started of a tool that must not run twice (neither ``idempotent``
    #: nor ``atomic``): a continuation never runs that call again if it has no result.
    started_call = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "parent_tool_call_id"], name="one_sub_run_per_call"
            )
        ]

    def __str__(self) -> str:
        return f"{self.assistant} for {self.parent_tool_call_id} ({self.status})"


class ExternalEventRecord(models.Model):
    """Audit trail of every reply a client sent to a session (approvals, answers, steering).

    The row is written before the reply is delivered; ``accepted_by`` is filled in once the
    verdict is known (``None`` until then, or if the process died in between).
    """

    session = models.ForeignKey(
        ChatSession, on_delete=models.CASCADE, related_name="external_events"
    )
    request_id = models.CharField(max_length=64, blank=True)
    name = models.CharField(max_length=255)
    correlation_id = models.CharField(max_length=255, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    #: Names of the extensions that claimed the event; empty means it was rejected.
    accepted_by = models.JSONField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at"]

    @property
    def accepted(self) -> bool:
        return bool(self.accepted_by)

    def __str__(self) -> str:
        return f"{self.name} ({'accepted' if self.accepted else 'rejected'})"


class TokenUsage(models.Model):
    """The tokens one person used on one day: the row every budget check locks.

    ``person`` is ``agent_app.guard.access.Person.key`` (``user:<pk>`` or
    ``browser:<id>``); ``user`` is set for a signed-in person, for the admin.
    ``reserved_tokens`` and ``in_flight`` are held by model calls under way (released when
    each settles, or dropped once ``reserved_until`` has passed: a worker died mid-call).
    ``agent_app.budgets.ledger`` tells the whole story.
    """

    person = models.CharField(max_length=100)
    day = models.DateField()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="zett_token_usage",
    )
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    #: Model calls that settled this day.
    calls = models.PositiveIntegerField(default=0)
    #: Runs and model calls refused because the budget was used up.
    refusals = models.PositiveIntegerField(default=0)
    #: Tokens one call of this person typically costs (carried over from the day before).
    call_estimate = models.PositiveBigIntegerField(default=0)
    reserved_tokens = models.PositiveBigIntegerField(default=0)
    in_flight = models.PositiveIntegerField(default=0)
    reserved_until = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day", "person"]
        verbose_name = "token usage"
        verbose_name_plural = "token usage"
        constraints = [
            models.UniqueConstraint(fields=["person", "day"], name="one_usage_row_per_person_day")
        ]

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __str__(self) -> str:
        return f"{self.person} on {self.day}: {self.total_tokens} tokens"


class ApiToken(models.Model):
    """A secret a program presents (``Authorization: Bearer <secret>``) to act as ``user``.

    Only a SHA-256 of the secret is kept (the secret is shown once, when the token is
    issued); ``agent_app.guard.tokens`` checks a presented secret against it.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="zett_api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    #: The secret's first characters, to tell tokens apart (never enough to use one).
    prefix = models.CharField(max_length=12, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name or 'token'} ({self.prefix}…) of {self.user_id}"


class FeedbackRating(models.TextChoices):
    UP = "up", "👍"
    DOWN = "down", "👎"


class ChatFeedback(models.Model):
    """A person's rating of one answer: one per person per answer, changed in place.

    ``person`` is ``agent_app.guard.access.Person.key``; ``assistant`` is copied from the
    chat when the rating is given, so the list filters without a join.
    """

    message = models.ForeignKey(ChatMessage, on_delete=models.CASCADE, related_name="feedback")
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="feedback")
    person = models.CharField(max_length=100)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="zett_feedback",
    )
    assistant = models.CharField(max_length=64, blank=True)
    rating = models.CharField(max_length=8, choices=FeedbackRating.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        verbose_name = "feedback"
        verbose_name_plural = "feedback"
        constraints = [
            models.UniqueConstraint(fields=["message", "person"], name="one_rating_per_person")
        ]
        indexes = [models.Index(fields=["rating", "updated_at"], name="feedback_rating_time")]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on message {self.message_id}"


class ChatTakeover(models.Model):
    """A member of staff answering in a chat, from ``takeover`` to ``hand_back``."""

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="takeovers")
    staff = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="zett_takeovers",
    )
    #: The name shown to the customer, kept if the account goes.
    staff_name = models.CharField(max_length=150)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.staff_name} in {str(self.session_id)[:8]}"


# The tables of webhooks and schedules have modules of their own in this package; imported
# here so that Django registers them with the app.
from agent_app.models.schedules import ScheduledRun  # noqa: E402, F401
from agent_app.models.webhooks import DeliveryStatus, Webhook, WebhookDelivery  # noqa: E402, F401
