"""``ChatConsumer``: the socket of one chat session (``/ws/sessions/<uuid>/``).

The consumer only parses and routes. Each inbound frame is validated by
``agent_app.protocol`` (a bad one is answered with an ``error`` frame and the socket stays
open), then handled by one small method. The agent's work happens in the session's run
task (``agent_app.live``), never here, which is why ``cancel``, ``steer`` and
``external_event`` are read while a request runs. The concurrency story (runs, ``seq``,
cancellation, several sockets on one session) is told once, in ``agent_app.live``.

The consumer joins no channel layer: live sessions are shared in process, so a layer
channel per socket (with Redis, a blocking read kept open for every idle socket) would
carry nothing.

Access: a session without an owner is open to anyone who knows its id (like the pages in
``agent_app.views``); an owned session only to its owner. A socket for an unknown id
creates the session, owned by the signed-in user if there is one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from agent_app.live import Busy, LiveSession, live_sessions
from agent_app.models import ChatSession, ExternalEventRecord
from agent_app.persistence import load_history
from agent_app.protocol import (
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    ExternalEventFrame,
    ExternalEventResultFrame,
    FrameError,
    InboundFrame,
    OutboundFrame,
    PingFrame,
    PongFrame,
    SessionFrame,
    SteerFrame,
    UserMessageFrame,
    encode_frame,
    parse_frame,
)

__all__ = ["FORBIDDEN_CLOSE_CODE", "STEERING_EVENT", "ChatConsumer", "FrameBudget"]

logger = logging.getLogger(__name__)

#: Close code after a ``forbidden`` error (4000-4999 are the application's own).
FORBIDDEN_CLOSE_CODE = 4403
#: The external event a ``steer`` frame stands for.
STEERING_EVENT = "steering_message"


class FrameBudget:
    """A token bucket: ``burst`` frames at once, refilled at ``per_second``."""

    def __init__(self, burst: int, per_second: float, clock=time.monotonic) -> None:
        if burst < 1 or per_second < 0:
            raise ValueError(f"need burst >= 1 and per_second >= 0, got {burst}, {per_second}")
        self.burst = burst
        self.per_second = per_second
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()

    def take(self) -> bool:
        """Spend one token; False when the budget is exhausted."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.per_second)
        self._updated = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class ChatConsumer(AsyncWebsocketConsumer):
    """Parses frames, routes them to the live session, and forwards its frames."""

    #: No channel layer (see the module docstring): ``get_channel_layer`` answers None
    #: for an alias that is not configured.
    channel_layer_alias = None
    live: LiveSession | None = None

    async def connect(self) -> None:
        self.session_id = str(self.scope["url_route"]["kwargs"]["session_id"])
        limits = getattr(settings, "ZETT_WS_RATE_LIMIT", {"burst": 60, "per_second": 20})
        self.budget = FrameBudget(int(limits["burst"]), float(limits["per_second"]))
        # Held while joining, so no run frame reaches this socket before ``session``.
        self._send_lock = asyncio.Lock()
        allowed = await _open_session(self.session_id, self.scope.get("user"))
        await self.accept()
        if not allowed:
            await self.send_frame(
                ErrorFrame(code=ErrorCode.FORBIDDEN, message="This session belongs to someone else")
            )
            await self.close(code=FORBIDDEN_CLOSE_CODE)
            return
        async with self._send_lock:
            self.live = await live_sessions().attach(self.session_id, self)
            active = self.live.active_request_id
            history = await load_history(self.session_id)
            await self._send_now(
                SessionFrame(session_id=self.session_id, history=history, active_request_id=active)
            )

    async def disconnect(self, code: int) -> None:
        if self.live is not None:
            live, self.live = self.live, None
            await live_sessions().detach(live, self)

    async def send_frame(self, frame: OutboundFrame) -> None:
        await self.send_text(encode_frame(frame.dump()))

    async def send_text(self, text: str) -> None:
        """Send one encoded frame (the live session encodes each once for all its sockets)."""
        async with self._send_lock:
            await self.send(text_data=text)

    async def _send_now(self, frame: OutboundFrame) -> None:
        await self.send(text_data=encode_frame(frame.dump()))

    # --- inbound -----------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.live is None:
            return  # refused socket, closing
        if not self.budget.take():
            await self._error(ErrorCode.RATE_LIMITED, "Too many frames; slow down and resend")
            return
        try:
            frame = parse_frame(_as_text(text_data, bytes_data))
        except FrameError as error:
            await self.send_frame(error.frame())
            return
        await self._route(frame)

    async def _route(self, frame: InboundFrame) -> None:
        match frame:
            case UserMessageFrame():
                await self.on_user_message(frame)
            case ExternalEventFrame():
                await self.on_external_event(frame)
            case SteerFrame():
                await self.on_steer(frame)
            case CancelFrame():
                await self.on_cancel()
            case PingFrame():
                await self.send_frame(PongFrame())

    async def on_user_message(self, frame: UserMessageFrame) -> None:
        assert self.live is not None
        try:
            await self.live.start_run(frame.content, owner=self)
        except Busy as busy:
            await self._error(ErrorCode.BUSY, str(busy))

    async def on_external_event(self, frame: ExternalEventFrame) -> None:
        assert self.live is not None
        running = self.live.active_request_id is not None
        if not running:
            await self._error(ErrorCode.NOT_RUNNING, "No request is running to receive this")
        await self._deliver(frame.name, frame.payload)

    async def on_steer(self, frame: SteerFrame) -> None:
        assert self.live is not None
        if self.live.active_request_id is None:
            await self._error(ErrorCode.NOT_RUNNING, "No request is running to steer")
            return
        await self._deliver(STEERING_EVENT, {"content": frame.content})

    async def on_cancel(self) -> None:
        assert self.live is not None
        if not await self.live.cancel():
            await self._error(ErrorCode.NOT_RUNNING, "No request is running to cancel")

    async def _deliver(self, name: str, payload: dict[str, Any]) -> None:
        """Hand a reply to the running request, tell the client who took it, record it."""
        assert self.live is not None
        correlation = payload.get("tool_call_id")

        async def answer(accepted_by: list[str]) -> None:
            await self.send_frame(
                ExternalEventResultFrame(
                    name=name,
                    correlation_id=correlation if isinstance(correlation, str) else None,
                    accepted_by=accepted_by,
                )
            )

        request_id, accepted_by = await self.live.deliver(name, payload, answer)
        # After the verdict, outside the session's lock: the run the reply woke goes on
        # while the row is written, and this socket's next frame waits for it.
        try:
            await ExternalEventRecord.objects.acreate(
                session_id=self.session_id,
                request_id=request_id or "",
                name=name,
                payload=payload,
                accepted_by=accepted_by,
            )
        except Exception:
            logger.exception(
                "Could not record the %s reply to session %s (accepted by %s)",
                name,
                self.session_id,
                accepted_by,
            )

    async def _error(self, code: ErrorCode, message: str) -> None:
        await self.send_frame(ErrorFrame(code=code, message=message))


def _as_text(text_data: str | None, bytes_data: bytes | None) -> str:
    if text_data is not None:
        return text_data
    try:
        return (bytes_data or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError(ErrorCode.BAD_JSON, "A binary frame must hold UTF-8 JSON text") from None


@database_sync_to_async
def _open_session(session_id: str, user: Any) -> bool:
    """Create the session if it is new; True when ``user`` may use it."""
    signed_in = user is not None and user.is_authenticated
    session, _ = ChatSession.objects.get_or_create(
        pk=session_id, defaults={"owner": user if signed_in else None}
    )
    return session.owner_id is None or (signed_in and session.owner_id == user.pk)
