"""Whose chat is it: who may list, open, create and post to a chat session.

A chat is never public. It belongs to the signed-in user who created it (``owner``), or,
for a visitor who is not signed in, to the *browser* that created it: a random id kept in
the Django session (``browser_key``; not the session key itself, which Django rotates at
sign-in). A ``Person`` is that identity; ``Person.key`` names it for the per-person limits
of ``agent_app.guard.limits``.

Rules (docs/security.md has the whole threat model):

- **Listing** (``visible_sessions``): only the person's own chats, and only chats that hold
  a message: an empty chat is never stored, and a legacy empty row is never shown.
- **Opening** (``may_open``; sockets: ``open_chat``/``close_chat``): an id with no row
  opens as an empty chat for anyone with an identity; a row opens only for its owner (or
  its browser). For everyone else it does not exist: the page is a 404, the socket
  ``forbidden``. A row with neither owner nor browser (written by code outside this
  module) opens for nobody. While an id has no row, its sockets in one process all belong
  to the first person who opened it (``_Claims``).
- **Creating** (``ensure_session``): the first ``user_message`` stores the row, owned by the
  sender, after the "chats created per person per hour" quota (which counts chats created,
  deleted ones too: ``agent_app.durable.chat_records``); connecting stores nothing. A deleted
  chat's id is never stored again.
- **Identity of a socket** (``person_of_scope``): the user, or the browser id in the
  session the cookie names. A socket with neither (no cookie, or one for an unknown or
  expired session) has no identity and may do nothing (``forbidden``).
- **Signing in** adopts the browser's chats (``owner`` set, ``browser_key`` cleared);
  **signing out** closes every socket of that user, in every process, through the channel
  layer group ``user_group(user_id)``. With ``ZETT_REQUIRE_LOGIN`` anonymous visitors have
  no identity at all: pages send them to the login page, sockets are ``forbidden``.
- A **deleted chat**'s record is marked (``agent_app.durable.chat_records``) and its sockets are
  told and closed (``chat_was_deleted``): this process's at once, a signed-in owner's in
  every process through their user group.
- A deleted user's chats are deleted with them (``on_delete=CASCADE``), and their sockets
  are closed like at sign-out; a socket that did not hear of it (another process, the
  in-memory layer) is closed at its next run start (``still_exists``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import secrets
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.http import HttpRequest
from django.utils import timezone

from agent_app import conf
from agent_app.assistants import registry
from agent_app.durable.chat_records import (
    CHAT_DELETED_EVENT,
    created_since,
    mark_deleted,
    record_creation,
    was_deleted,
)
from agent_app.guard.limits import current_limits
from agent_app.models import ChatMessage, ChatSession
from agent_app.models.statements import pk_exists
from agent_app.telemetry import metrics

__all__ = [
    "BROWSER_KEY_FIELD",
    "SIGNED_OUT_EVENT",
    "Creation",
    "Person",
    "assistant_refusal",
    "chat_was_deleted",
    "close_chat",
    "ensure_session",
    "find_sockets_with",
    "known_person_of_request",
    "login_required",
    "may_open",
    "open_chat",
    "person_of_request",
    "person_of_scope",
    "still_exists",
    "user_group",
    "visible_sessions",
]

logger = logging.getLogger(__name__)

#: The Django session key holding the browser's id.
BROWSER_KEY_FIELD = "zett_browser_key"
#: The channel layer message that tells a user's sockets they signed out.
SIGNED_OUT_EVENT = "zett.signed_out"


@dataclass(frozen=True, slots=True)
class Person:
    """Who is behind a request or socket: a signed-in user, or an anonymous browser."""

    user_id: int | None
    #: The browser's id; a signed-in user's browser keeps one too (chats it created while
    #: a sign-in was racing them are still theirs).
    browser_key: str | None = None

    @property
    def key(self) -> str:
        """A stable name for the per-person limits."""
        return f"user:{self.user_id}" if self.user_id is not None else f"browser:{self.browser_key}"

    @property
    def signed_in(self) -> bool:
        return self.user_id is not None


def login_required() -> bool:
    """``ZETT_REQUIRE_LOGIN``: anonymous visitors may not chat at all."""
    return bool(conf.ZETT_REQUIRE_LOGIN)


def user_group(user_id: int) -> str:
    """The channel layer group of every socket of one user (closed when they sign out)."""
    return f"zett.user.{user_id}"


# --- identity ------------------------------------------------------------------------------


def person_of_request(request: HttpRequest) -> Person | None:
    """The visitor of a page; gives an anonymous browser its id (and so its cookie).

    None only with ``ZETT_REQUIRE_LOGIN`` for a visitor who is not signed in.
    """
    key = request.session.get(BROWSER_KEY_FIELD)
    if request.user.is_authenticated:
        return Person(request.user.pk, key or None)
    if login_required():
        return None
    if not key:
        key = request.session[BROWSER_KEY_FIELD] = secrets.token_urlsafe(24)
    return Person(None, key)


def known_person_of_request(request: HttpRequest) -> Person | None:
    """The visitor of an API request, read only: the signed-in user, or the anonymous
    browser a page already gave an id; None otherwise. Never writes a session: a request
    without a cookie (or with one no page gave) must not cost a session row."""
    if settings.SESSION_COOKIE_NAME not in request.COOKIES:
        return None
    key = request.session.get(BROWSER_KEY_FIELD)
    if request.user.is_authenticated:
        return Person(request.user.pk, key or None)
    if login_required() or not key:
        return None
    return Person(None, key)


async def person_of_scope(scope: dict[str, Any]) -> Person | None:
    """The person behind a socket, or None if it has no identity (no user, no session)."""
    user = scope.get("user")
    session = scope.get("session")
    if user is not None and user.is_authenticated:
        key = await database_sync_to_async(_browser_key)(session, create=False)
        return Person(user.pk, key)
    if login_required() or session is None:
        return None
    key = await database_sync_to_async(_browser_key)(session, create=True)
    return None if key is None else Person(None, key)


async def still_exists(person: Person) -> bool:
    """Whether the person's account still exists (an anonymous browser always does).

    A user deleted by another process is told through the channel layer (their sockets
    close like at sign-out); with the in-memory layer another process cannot reach this
    one, so each run start checks again: a run must not write chats for a user who is gone.
    """
    if person.user_id is None:
        return True
    from django.contrib.auth import get_user_model

    # ``objects.filter(pk=…).exists()``, one statement built once: every run start asks it.
    return await database_sync_to_async(pk_exists)(get_user_model().objects, person.user_id)


def _browser_key(session: Any, *, create: bool) -> str | None:
    """The browser id kept in ``session``; made and saved if ``create`` and the session
    really exists (a socket cannot set a cookie: a session it made would be unreachable)."""
    if session is None:
        return None
    key = session.get(BROWSER_KEY_FIELD)
    if key or not create:
        return key or None
    if session.session_key is None:  # no cookie, or one for an unknown or expired session
        return None
    key = secrets.token_urlsafe(24)
    session[BROWSER_KEY_FIELD] = key
    try:
        session.save()
    except Exception:  # the session row vanished meanwhile (signed out, expired, cleared)
        return None
    return key


# --- which chats ---------------------------------------------------------------------------


def _theirs(person: Person) -> Q:
    mine = Q(pk__in=[])
    if person.user_id is not None:
        mine |= Q(owner_id=person.user_id)
    if person.browser_key:
        mine |= Q(owner__isnull=True, browser_key=person.browser_key)
    return mine


def visible_sessions(person: Person | None) -> QuerySet[ChatSession]:
    """The person's chats that hold a message, newest activity first."""
    if person is None:
        return ChatSession.objects.none()
    has_messages = Exists(ChatMessage.objects.filter(session=OuterRef("pk")))
    return (
        ChatSession.objects.filter(_theirs(person))
        .filter(has_messages)
        .order_by("-updated_at", "-created_at")
    )


def may_open(person: Person | None, session: ChatSession | None) -> bool:
    """Whether ``person`` may open ``session`` (None: no row yet, an empty chat)."""
    if person is None:
        return False
    if session is None:
        return True
    if session.owner_id is not None:
        return session.owner_id == person.user_id
    return bool(session.browser_key) and session.browser_key == person.browser_key


class Creation(enum.Enum):
    """What ``ensure_session`` found or did."""

    EXISTS = "exists"
    CREATED = "created"
    FORBIDDEN = "forbidden"
    QUOTA = "quota"
    #: The chat was deleted (``agent_app.durable.chat_records``): it is not stored again.
    DELETED = "deleted"


@database_sync_to_async
def ensure_session(person: Person, session_id: str, assistant: str = "") -> Creation:
    """Store the session at its first message, owned by ``person`` (quota permitting),
    bound to ``assistant`` (an id the caller checked; "": the default)."""
    row = ChatSession.objects.filter(pk=session_id).first()
    if row is not None:
        return Creation.EXISTS if may_open(person, row) else Creation.FORBIDDEN
    if was_deleted(session_id):
        return Creation.DELETED
    since = timezone.now() - timedelta(hours=1)
    if created_since(person.key, since) >= current_limits().max_chats_per_hour:
        metrics.rate_limited("chats_per_hour")
        return Creation.QUOTA
    try:
        with transaction.atomic():
            created = ChatSession.objects.create(
                pk=session_id,
                assistant=assistant or registry.default_id() or "",
                owner_id=person.user_id,
                browser_key="" if person.user_id is not None else person.browser_key or "",
            )
            record_creation(session_id, person.key, created.created_at)
    except IntegrityError:  # another socket stored it first: whose is it?
        row = ChatSession.objects.filter(pk=session_id).first()
        return Creation.EXISTS if may_open(person, row) else Creation.FORBIDDEN
    return Creation.CREATED


def assistant_refusal(user: Any, session_id: str, wanted: str | None = None) -> tuple[str, str]:
    """Why ``user`` may not chat with the assistant of ``session_id`` (or, for a chat not
    stored yet, with ``wanted`` or the default): ``(error code, message)``, or ``("", "")``
    when they may. One query (the chat's assistant id) plus the permission check's."""
    from agent_app.assistants import UnknownAssistant

    bound = ChatSession.objects.filter(pk=session_id).values_list("assistant", flat=True).first()
    try:
        assistant = registry.resolve(bound if bound is not None else wanted)
    except UnknownAssistant as unknown:
        return "unknown_assistant", str(unknown)
    if not assistant.has_permission(user):
        return "forbidden", f"You may not chat with the assistant {assistant.display_name!r}"
    return "", ""


def chat_quota_message() -> str:
    limit = current_limits().max_chats_per_hour
    return f"You started {limit} chats in the last hour, the most allowed; try again later"


# --- signing in and out --------------------------------------------------------------------


@receiver(user_logged_in, dispatch_uid="zett.adopt_browser_chats")
def adopt_browser_chats(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """Signing in makes the browser's anonymous chats the user's."""
    session = getattr(request, "session", None)
    key = session.get(BROWSER_KEY_FIELD) if session is not None else None
    if key:
        ChatSession.objects.filter(owner__isnull=True, browser_key=key).update(
            owner=user, browser_key=""
        )


@receiver(user_logged_out, dispatch_uid="zett.close_user_sockets")
def close_user_sockets(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """Signing out closes every socket of the user, in every worker process."""
    if user is not None:
        _close_sockets_of(user.pk)


@receiver(post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="zett.close_deleted_user")
def close_deleted_users_sockets(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A deleted user's chats are gone (``CASCADE``); so are their sockets."""
    _close_sockets_of(instance.pk)


def _close_sockets_of(user_id: Any) -> None:
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(user_group(user_id), {"type": SIGNED_OUT_EVENT})


@receiver(post_delete, sender=ChatSession, dispatch_uid="zett.chat_deleted")
def chat_was_deleted(sender: Any, instance: ChatSession, **kwargs: Any) -> None:
    """Mark the chat's record deleted; once that is committed, close its sockets."""
    mark_deleted(instance)
    session_id, owner_id = str(instance.pk), instance.owner_id
    transaction.on_commit(lambda: _tell_sockets(session_id, owner_id))


def _tell_sockets(session_id: str, owner_id: Any) -> None:
    if owner_id is not None:
        layer = get_channel_layer()
        if layer is not None:
            try:
                async_to_sync(layer.group_send)(
                    user_group(owner_id), {"type": CHAT_DELETED_EVENT, "session_id": session_id}
                )
            except Exception:
                logger.warning("Could not tell the sockets of chat %s it was deleted", session_id)
    async_to_sync(_close_sockets_here)(session_id)


#: The sockets this process holds on a chat (``agent_app.sessions.registry.sockets_here``,
#: handed in when the app is ready: the sessions sit above this layer).
SocketsHere = Callable[[str], list[Any]]
_sockets_here: list[SocketsHere] = []


def find_sockets_with(find: SocketsHere) -> None:
    """Find the sockets to close on a deleted chat with ``find`` (the app does, when ready)."""
    _sockets_here[:] = [find]


async def _close_sockets_here(session_id: str) -> None:
    """Close the sockets this process holds on the chat (in the loop that serves them)."""
    for socket in _sockets_here[0](session_id) if _sockets_here else []:
        closer = getattr(socket, "chat_deleted", None)
        if closer is not None:
            await closer()


# --- chats not stored yet ------------------------------------------------------------------


class _Claims:
    """Who holds sockets on chat ids that have no row yet, in this event loop.

    Until its first message a chat has no owner in the database, yet the sockets on one id
    share one live session (``agent_app.sessions.live``): without this, a second person who learned
    a fresh id could watch, cancel or answer the first one's run once it starts. So the
    first person to open an unstored id holds it in this process until their sockets leave.
    (Each process has its own live sessions, so a claim need not cross processes: a socket
    elsewhere shares nothing with these, and its first message finds the stored row.)
    """

    def __init__(self) -> None:
        self._holders: dict[str, tuple[str, int]] = {}

    def take(self, session_id: str, person: Person) -> bool:
        holder, count = self._holders.get(session_id, (person.key, 0))
        if holder != person.key:
            return False
        self._holders[session_id] = (holder, count + 1)
        return True

    def release(self, session_id: str, person: Person) -> None:
        holder, count = self._holders.get(session_id, (None, 0))
        if holder != person.key:
            return
        if count <= 1:
            del self._holders[session_id]
        else:
            self._holders[session_id] = (holder, count - 1)


_claims: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Claims] = weakref.WeakKeyDictionary()


def _loop_claims() -> _Claims:
    loop = asyncio.get_running_loop()
    claims = _claims.get(loop)
    if claims is None:
        claims = _claims[loop] = _Claims()
    return claims


async def open_chat(person: Person | None, session_id: str) -> bool:
    """The socket's connect check: may ``person`` open this chat? Holds it if unstored.

    Every True must be paired with ``close_chat`` when the socket ends.
    """
    if person is None:
        return False
    row = await database_sync_to_async(ChatSession.objects.filter(pk=session_id).first)()
    if row is not None and not may_open(person, row):
        return False
    if row is None and await database_sync_to_async(was_deleted)(session_id):
        return False  # a deleted chat does not open again, not even empty
    return _loop_claims().take(session_id, person)


def close_chat(person: Person, session_id: str) -> None:
    """Release what ``open_chat`` held."""
    _loop_claims().release(session_id, person)
