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

import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from agent_app.live import Busy, LiveSession, NotRunning, Verdict, live_sessions
from agent_app.models import ChatSession, ExternalEventRecord, RunKind
from agent_app.protocol import (
    CancelFrame,
    EditLastFrame,
    ErrorCode,
    ErrorFrame,
    ExternalEventFrame,
    ExternalEventResultFrame,
    FrameError,
    HistoryBeforeFrame,
    HistoryPageFrame,
    InboundFrame,
    OutboundFrame,
    PingFrame,
    PongFrame,
    RegenerateFrame,
    SteerFrame,
    UserMessageFrame,
    encode_frame,
    parse_frame,
)
from agent_app.runs import Creator, NothingToReplace

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
        allowed = await _open_session(self.session_id, self.scope.get("user"))
        await self.accept()
        if not allowed:
            await self.send_frame(
                ErrorFrame(code=ErrorCode.FORBIDDEN, message="This session belongs to someone else")
            )
            await self.close(code=FORBIDDEN_CLOSE_CODE)
            return
        live = live_sessions().session(self.session_id)
        await live.join(self, after_seq=_after_seq(self.scope))
        self.live = live

    async def disconnect(self, code: int) -> None:
        if self.live is not None:
            live, self.live = self.live, None
            live.leave(self)

    async def send_frame(self, frame: OutboundFrame) -> None:
        await self.send_text(encode_frame(frame.dump()))

    async def send_text(self, text: str) -> None:
        """Send one encoded frame (the live session encodes each once for all its sockets)."""
        await self.send(text_data=text)

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
                await self.on_external_event(frame.name, frame.payload)
            case SteerFrame():
                await self.on_steer(frame)
            case CancelFrame():
                await self.on_cancel()
            case HistoryBeforeFrame():
                await self.on_history_before(frame)
            case RegenerateFrame():
                await self.on_replace_last_turn(None, RunKind.REGENERATE)
            case EditLastFrame():
                await self.on_replace_last_turn(frame.content, RunKind.EDIT)
            case PingFrame():
                await self.send_frame(PongFrame())

    async def on_user_message(self, frame: UserMessageFrame) -> None:
        assert self.live is not None
        user = self.scope.get("user")
        signed_in = user is not None and user.is_authenticated
        try:
            await self.live.start(frame.content, Creator(owner_id=user.pk if signed_in else None))
        except Busy as busy:
            await self._error(ErrorCode.BUSY, str(busy))

    async def on_replace_last_turn(self, content: str | None, kind: RunKind) -> None:
        """``regenerate`` (``content`` None) or ``edit_last``: answer the last turn anew."""
        assert self.live is not None
        try:
            await self.live.start(content, kind=kind, replace_last_turn=True)
        except Busy as busy:
            await self._error(ErrorCode.BUSY, str(busy))
        except NothingToReplace as nothing:
            await self._error(ErrorCode.BAD_FRAME, str(nothing))

    async def on_external_event(self, name: str, payload: dict[str, Any]) -> None:
        await self._deliver(name, payload)

    async def on_steer(self, frame: SteerFrame) -> None:
        assert self.live is not None
        if self.live.active_request_id is None:
            await self._error(ErrorCode.NOT_RUNNING, "No request is running to steer")
            return
        await self._deliver(STEERING_EVENT, {"content": frame.content})

    async def on_cancel(self) -> None:
        assert self.live is not None
        try:
            await self.live.cancel()
        except NotRunning:
            await self._error(ErrorCode.NOT_RUNNING, "No request is running to cancel")

    async def on_history_before(self, frame: HistoryBeforeFrame) -> None:
        assert self.live is not None
        page = await self.live.history_before(frame.position, frame.limit)
        await self.send_frame(HistoryPageFrame(**page))

    async def _deliver(self, name: str, payload: dict[str, Any]) -> None:
        """Record a reply, hand it to the run, tell the client who took it."""
        assert self.live is not None
        correlation = payload.get("tool_call_id")
        correlation = correlation if isinstance(correlation, str) else None
        record = await _audit(
            self.session_id, self.live.active_request_id, name, correlation, payload
        )

        async def answer(verdict: Verdict) -> None:
            await self.send_frame(
                ExternalEventResultFrame(
                    name=name,
                    correlation_id=correlation,
                    accepted_by=verdict.accepted_by,
                    reason=verdict.reason,
                )
            )

        verdict = await self.live.deliver(name, payload, answer)
        if record is not None:
            await _record_verdict(record, verdict)

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


async def _audit(
    session_id: str,
    request_id: str | None,
    name: str,
    correlation: str | None,
    payload: dict[str, Any],
) -> ExternalEventRecord | None:
    """Write the audit row of a reply before it is delivered (verdict unknown yet)."""
    try:
        return await ExternalEventRecord.objects.acreate(
            session_id=session_id,
            request_id=request_id or "",
            name=name,
            correlation_id=correlation or "",
            payload=payload,
            accepted_by=None,
        )
    except Exception:
        logger.exception("Could not record the %s reply to session %s", name, session_id)
        return None


async def _record_verdict(record: ExternalEventRecord, verdict: Verdict) -> None:
    try:
        await ExternalEventRecord.objects.filter(pk=record.pk).aupdate(
            accepted_by=verdict.accepted_by, request_id=verdict.request_id or record.request_id
        )
    except Exception:
        logger.exception("Could not record the verdict on reply %s", record.pk)


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
