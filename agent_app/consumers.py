"""``ChatConsumer``: the socket of one chat session (``/ws/sessions/<uuid>/``).

The consumer only parses and routes. A socket joins the session's live state
(``agent_app.sessions.live``) and leaves it when it ends; runs belong to the session, so
leaving never stops one. Each inbound frame is validated by ``agent_app.protocol.frames``
(a bad one is answered with an ``error`` frame and the socket stays open), then handled by
one small method: those that start a turn are ``agent_app.websocket.turns``'s, the
replies, steering and cancelling ``agent_app.websocket.replies``'. The agent's work
happens in the session's run task (``agent_app.sessions.live``), never here, which is
why ``cancel``, ``steer`` and ``external_event`` are read while a request runs. The
concurrency story (runs, ``seq``, cancellation, several sockets on one session) is told
once, in ``agent_app.sessions.live``.

The consumer is on the default channel layer for one reason: a signed-in user's sockets
join the group ``zett.user.<pk>``, so signing out closes them in every process. Anonymous
sockets have no group and read no layer channel.

Security (docs/security.md) lives in modules of its own; the consumer only calls them:
``agent_app.guard.access`` on connect (whose chat; a socket with no identity is ``forbidden``)
and at the first ``user_message`` (which stores the chat), ``agent_app.guard.limits`` on connect
(sockets per chat and per person) and for every frame (the person's frame budget),
``agent_app.durable.audit`` around every reply. The frames of people in the loop (ratings,
asking for a person, staff who take the chat over) are ``agent_app.websocket.people``'s: staff
(``agent_app.staff_chat``) may open any stored chat's socket, to watch and take it over.
Nothing a client sends can end the socket: a
handler that raises is answered with an ``internal`` error frame, and the socket's
resources (live session, run, counters, group) are released however it ends. Nor can the
socket's end undo what a frame started: a send to a socket that is closing is dropped
(``_gone``), so a reply sent just before its tab closed is still taken, audited and
announced. A socket that leaves more than ``ZETT_WS_SEND_BUFFER_BYTES`` unread is dropped
(``agent_app.sessions.backpressure``, close code 4408: the page reconnects and resumes); one whose
chat or user was deleted is told and closed (4410, 4403), and one opened with an API
token whose token is revoked or expires (``agent_app.guard.token_watch``) closes with 4401.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs

from channels import DEFAULT_CHANNEL_LAYER
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from agent_app import conf
from agent_app.budgets import budget_of
from agent_app.durable.chat_records import was_deleted
from agent_app.guard.access import (
    Person,
    assistant_refusal,
    close_chat,
    open_chat,
    person_of_scope,
    still_exists,
    user_group,
)
from agent_app.guard.limits import (
    TOO_MANY_SOCKETS_CLOSE_CODE,
    SocketTicket,
    history_page_cost,
    limiter,
)
from agent_app.guard.token_watch import TOKEN_ENDED_CLOSE_CODE, Watched, token_watch
from agent_app.models import RunKind
from agent_app.protocol.frames import (
    STEERING_EVENT,
    BudgetFrame,
    CancelFrame,
    EditFrame,
    EditLastFrame,
    ErrorCode,
    ErrorFrame,
    ExternalEventFrame,
    FrameError,
    HistoryBeforeFrame,
    HistoryPageFrame,
    InboundFrame,
    OutboundFrame,
    PingFrame,
    PongFrame,
    Refusal,
    RegenerateFrame,
    SteerFrame,
    SwitchVersionFrame,
    UserMessageFrame,
    encode_frame,
    parse_frame,
)
from agent_app.sessions.backpressure import (
    FELL_BEHIND_CLOSE_CODE,
    buffered_bytes,
    send_buffer_cap,
    transport_of,
)
from agent_app.sessions.live import LiveSession
from agent_app.sessions.registry import live_sessions
from agent_app.websocket.people import PeopleFrames, staff_of_socket
from agent_app.websocket.replies import ReplyFrames
from agent_app.websocket.turns import TurnFrames

__all__ = ["DELETED_CLOSE_CODE", "FORBIDDEN_CLOSE_CODE", "STEERING_EVENT", "ChatConsumer"]

logger = logging.getLogger(__name__)

#: What a socket of a deleted chat is told before it closes.
CHAT_DELETED_MESSAGE = "This chat was deleted"

#: Close code after a ``forbidden`` error (4000-4999 are the application's own).
FORBIDDEN_CLOSE_CODE = 4403
#: Close code of a socket whose chat was deleted (by another tab, or anywhere else).
DELETED_CLOSE_CODE = 4410
#: Close code when connecting itself failed on the server (database down …).
INTERNAL_CLOSE_CODE = 1011


class ChatConsumer(PeopleFrames, TurnFrames, ReplyFrames, AsyncWebsocketConsumer):
    """Parses frames, routes them to the live session, and forwards its frames."""

    #: For the per-user group that signing out closes (see the module docstring).
    channel_layer_alias = DEFAULT_CHANNEL_LAYER
    live: LiveSession | None = None
    person: Person | None = None
    _holds_chat = False
    _ticket: SocketTicket | None = None
    _group: str | None = None
    #: Set once the socket is gone: later sends are dropped quietly.
    _closed = False
    _accepted = False
    #: daphne's transport of this socket, whose unsent bytes are capped (``_send_cap``).
    _transport: Any = None
    _send_cap = 0
    #: Told that its chat was deleted (``chat_deleted``).
    _deleted = False
    #: A socket opened with an API token: watched until the token ends (``token_watch``).
    _token: Watched | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            # Only a signed-in user's sockets have a group to hear (sign-out): an anonymous
            # socket reads no layer channel (with Redis, a blocking read per idle socket).
            self.channel_layer_alias = None
        try:
            await super().__call__(scope, receive, send)
        finally:
            # However the socket ended (disconnect, an error, the server cancelling the
            # application): release everything. Shielded, so a second cancellation cannot
            # stop the release half-way; it then finishes in its own task.
            await asyncio.shield(asyncio.ensure_future(self._release()))

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Hand ``message`` to its handler, without a database round trip first.

        Channels' own ``dispatch`` closes the thread's stale database connections before
        every message, one hop to the ORM thread per frame. Every ORM call of this consumer
        (and of what it calls) goes through ``database_sync_to_async``, which does the same
        around each call in that thread, so the per-frame hop would only repeat it.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        self.session_id = str(self.scope["url_route"]["kwargs"]["session_id"])
        self._send_lock = asyncio.Lock()
        try:
            await self._join()
        except Exception:
            logger.exception("Opening a socket on session %s failed", self.session_id)
            await self._release()
            await self._refuse(
                ErrorCode.INTERNAL, "The server could not open this chat", INTERNAL_CLOSE_CODE
            )

    async def _join(self) -> None:
        self.person = await person_of_scope(self.scope)
        user = self.scope.get("user")
        self.staff, self.watching = await staff_of_socket(user, self.person, self.session_id)
        if not self.watching and not await open_chat(self.person, self.session_id):
            if self.person is not None and await database_sync_to_async(was_deleted)(
                self.session_id
            ):
                await self._refuse(ErrorCode.FORBIDDEN, CHAT_DELETED_MESSAGE, DELETED_CLOSE_CODE)
                return
            message = (
                "Sign in, or allow cookies, to chat"
                if self.person is None
                else "This session belongs to someone else"
            )
            await self._refuse(ErrorCode.FORBIDDEN, message, FORBIDDEN_CLOSE_CODE)
            return
        assert self.person is not None
        self._holds_chat = not self.watching
        code, why = await database_sync_to_async(assistant_refusal)(
            self.scope.get("user"), self.session_id
        )
        if code and not self.watching:
            await self._refuse(ErrorCode(code), why, FORBIDDEN_CLOSE_CODE)
            return
        try:
            self._ticket = limiter().open_socket(self.person.key, self.session_id)
        except Refusal as refusal:
            await self._refuse(refusal.code, refusal.message, TOO_MANY_SOCKETS_CLOSE_CODE)
            return
        if self.person.user_id is not None and self.channel_layer is not None:
            self._group = user_group(self.person.user_id)
            await self.channel_layer.group_add(self._group, self.channel_name)
        await self.accept()
        token_id = self.scope.get("zett_token_id")
        if token_id is not None:
            self._token = token_watch().watch(token_id, self._token_ended)
        live = live_sessions().session(self.session_id)
        self.live = live  # set first: however joining ends, release leaves the session
        await live.join(self, after_seq=_after_seq(self.scope))
        await self._send_budget()

    async def _send_budget(self) -> None:
        """The person's token budget of today, for the composer (when one applies)."""
        assert self.person is not None
        if not conf.ZETT_TOKEN_BUDGETS:
            return
        budget = await database_sync_to_async(budget_of)(self.person)
        if budget is not None:
            await self.send_frame(BudgetFrame(**budget.as_dict()))

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        self._accepted = True
        await super().accept(subprotocol, headers)
        self._transport = transport_of(self.base_send)
        self._send_cap = send_buffer_cap()

    async def _refuse(self, code: ErrorCode, message: str, close_code: int) -> None:
        """Accept (so the client can read why) unless done already, send the error, close."""
        if not self._accepted:
            await self.accept()
        self._closed = False  # one last frame: why the socket closes
        await self._send_quietly(ErrorFrame(code=code, message=message))
        self._closed = True
        await self.close(code=close_code)

    async def disconnect(self, code: int) -> None:
        await self._release()

    async def _release(self) -> None:
        """Leave the live session and give back every count and group (idempotent)."""
        self._closed = True
        live, self.live = self.live, None
        ticket, self._ticket = self._ticket, None
        group, self._group = self._group, None
        holds_chat, self._holds_chat = self._holds_chat, False
        token, self._token = self._token, None
        try:
            if token is not None:
                token_watch().forget(token)
            if live is not None:
                live.leave(self)
        finally:
            if ticket is not None:
                limiter().close_socket(ticket)
            if holds_chat and self.person is not None:
                close_chat(self.person, self.session_id)
            if group is not None:
                try:
                    await self.channel_layer.group_discard(group, self.channel_name)
                except Exception:
                    logger.warning("Could not leave the channel layer group %s", group)

    async def zett_signed_out(self, event: dict[str, Any]) -> None:
        """The user signed out (``agent_app.guard.access.close_user_sockets``): close the socket."""
        await self._release()
        await self._refuse(ErrorCode.FORBIDDEN, "You signed out", FORBIDDEN_CLOSE_CODE)

    async def _token_ended(self) -> None:
        """Its API token was revoked or expired, or its user deactivated: close."""
        await self._release()
        message = "Your API token was revoked or has expired"
        await self._refuse(ErrorCode.FORBIDDEN, message, TOKEN_ENDED_CLOSE_CODE)

    async def zett_chat_deleted(self, event: dict[str, Any]) -> None:
        """One of the user's chats was deleted (``agent_app.durable.chat_records``): this one?"""
        if event.get("session_id") == self.session_id:
            await self.chat_deleted()

    async def chat_deleted(self) -> None:
        """The chat is gone for good: say so and close (once, however often it is told)."""
        if self._deleted:
            return
        self._deleted = True
        await self._release()
        await self._refuse(ErrorCode.FORBIDDEN, CHAT_DELETED_MESSAGE, DELETED_CLOSE_CODE)

    async def send_frame(self, frame: OutboundFrame) -> None:
        await self.send_text(encode_frame(frame.dump()))

    async def send_text(self, text: str) -> None:
        """Send one encoded frame (the live session encodes each once for all its sockets).

        The hot path of every frame: the lock (frames leave in the order they were sent,
        even through a server whose send suspends) is taken without ``async with``, and
        the frame goes straight to the server's ``send`` (what ``self.send`` does, less
        two coroutine layers).
        """
        if self._closed:
            return
        lock = self._send_lock
        await lock.acquire()
        try:
            if not self._closed:
                await self.base_send({"type": "websocket.send", "text": text})
                transport = self._transport
                if transport is not None:
                    backlog = buffered_bytes(transport) - len(text)  # unread before this one
                    if backlog > self._send_cap:
                        await self._fell_behind(backlog)
        except Exception:
            self._gone()
        finally:
            lock.release()

    async def _fell_behind(self, held: int) -> None:
        """Drop a socket that does not read (``agent_app.sessions.backpressure``); it may come back.

        It leaves the session at once (no further frame is queued for it); the rest of
        the release happens when its disconnect arrives, as for any socket.
        """
        self._closed = True
        if self.live is not None:
            self.live.leave(self)
        logger.info(
            "Dropping a socket of session %s: %d bytes unread, more than %d",
            self.session_id,
            held,
            self._send_cap,
        )
        await self.base_send({"type": "websocket.close", "code": FELL_BEHIND_CLOSE_CODE})

    def _gone(self) -> None:
        """A send failed: the socket is closing (its ``websocket.disconnect`` is on its way).

        daphne refuses a send once the client's close frame has been read, which can be
        well before the disconnect reaches this consumer (the transport first drains what
        it still holds for the client). The frame that was being answered must not fail
        because its answer cannot be delivered: later sends to this socket are dropped.
        """
        if not self._closed:
            self._closed = True
            logger.debug("A socket of session %s is closing: sends dropped", self.session_id)

    async def _send_quietly(self, frame: OutboundFrame) -> None:
        """Send, and let a socket that is already gone be gone."""
        try:
            await self.send_frame(frame)
        except Exception:
            logger.debug("Could not send to a socket of session %s", self.session_id)

    # --- inbound -----------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.live is None or self.person is None:
            return  # refused socket, closing
        try:
            if not await limiter().take_frame(self.person.key):
                await self._error(ErrorCode.RATE_LIMITED, "Too many frames; slow down and resend")
                return
            try:
                frame = parse_frame(_as_text(text_data, bytes_data))
            except FrameError as error:
                await self.send_frame(error.frame())
                return
            await self._route(frame)
        except Exception:
            # Whatever failed, the client learns that its frame was not handled, and the
            # socket stays open; the details are for the log only.
            logger.exception("Handling a frame on session %s failed", self.session_id)
            await self._send_quietly(
                ErrorFrame(
                    code=ErrorCode.INTERNAL,
                    message="The server failed handling this frame; it was logged",
                )
            )

    async def _route(self, frame: InboundFrame) -> None:
        if (refusal := self.people_refusal(frame)) is not None:
            await self._error(ErrorCode.FORBIDDEN, refusal)
            return
        if await self.route_people(frame):
            return
        match frame:
            case UserMessageFrame():
                await self.on_user_message(frame)
            case ExternalEventFrame():
                await self.on_external_event(frame)
            case SteerFrame():
                await self.on_steer(frame)
            case CancelFrame():
                await self.on_cancel()
            case HistoryBeforeFrame():
                await self.on_history_before(frame)
            case RegenerateFrame():
                await self.on_replace_last_turn(None, RunKind.REGENERATE, frame.position)
            case EditLastFrame():
                await self.on_replace_last_turn(frame.content, RunKind.EDIT)
            case EditFrame():
                await self.on_replace_last_turn(frame.content, RunKind.EDIT, frame.position)
            case SwitchVersionFrame():
                await self.on_switch_version(frame)
            case PingFrame():
                await self.send_frame(PongFrame())

    async def on_history_before(self, frame: HistoryBeforeFrame) -> None:
        assert self.live is not None and self.person is not None
        # One frame was charged on arrival; a page is charged by its size (``limits``).
        extra = history_page_cost(frame.limit) - 1
        if extra and not await limiter().take_frame(self.person.key, extra):
            await self._error(ErrorCode.RATE_LIMITED, "Too many history pages; slow down")
            return
        page = await self.live.history_before(frame.position, frame.limit)
        await self.send_frame(HistoryPageFrame(**page))

    async def _account_exists(self) -> bool:
        """Check the user at each run start; close the socket of one deleted meanwhile."""
        assert self.person is not None
        if await still_exists(self.person):
            return True
        logger.info("Closing a socket of session %s: its user was deleted", self.session_id)
        await self._release()
        await self._refuse(
            ErrorCode.FORBIDDEN, "Your account no longer exists", FORBIDDEN_CLOSE_CODE
        )
        return False

    async def _error(self, code: ErrorCode, message: str) -> None:
        await self.send_frame(ErrorFrame(code=code, message=message))


def _after_seq(scope: dict[str, Any]) -> int | None:
    """The ``after_seq`` query parameter: the last ``seq`` the client saw."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after_seq")
    if not values:
        return None
    try:
        value = int(values[-1])
    except ValueError:
        return None
    return value if value >= 0 else None


def _as_text(text_data: str | None, bytes_data: bytes | None) -> str:
    if text_data is not None:
        return text_data
    try:
        return (bytes_data or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError(ErrorCode.BAD_JSON, "A binary frame must hold UTF-8 JSON text") from None
