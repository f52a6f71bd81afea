"""The socket side of people in the loop: the frames ``ChatConsumer`` hands here.

Who may send what: the chat's own person rates answers (``feedback``) and asks for a
person (``request_human``); staff (``agent_app.staff_chat``) send ``takeover``,
``staff_message`` and ``hand_back`` on any chat's socket. Staff watching someone else's
chat (``watching``) may only send staff frames, ask for history and ping: they write to
the customer with ``staff_message``, never as them. Everyone else's staff frame is
``forbidden``.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from agent_app.guard.access import Person, may_open, visible_sessions
from agent_app.models import ChatSession
from agent_app.people import records
from agent_app.people.state import is_staff
from agent_app.protocol.frames import (
    ErrorCode,
    ErrorFrame,
    FeedbackFrame,
    HandBackFrame,
    HistoryBeforeFrame,
    InboundFrame,
    OutboundFrame,
    PingFrame,
    RequestHumanFrame,
    StaffMessageFrame,
    TakeoverFrame,
)
from agent_app.protocol.people import FeedbackSavedFrame
from agent_app.sessions import people
from agent_app.sessions.live import LiveSession

__all__ = ["PeopleFrames", "staff_of_socket"]

_STAFF = (TakeoverFrame, StaffMessageFrame, HandBackFrame)
_WATCHING = (*_STAFF, HistoryBeforeFrame, PingFrame)
NOT_STAFF = "Only staff may take a chat over, write in it as staff or hand it back"
WATCHING = "You watch this chat as staff: take it over to write to the customer"


class PeopleFrames:
    """Mixed into ``ChatConsumer``: the frames of people in the loop."""

    live: LiveSession | None
    person: Person | None
    session_id: str
    scope: Any
    #: Staff on a chat that is not their own (let in by ``agent_app.staff_chat``).
    watching = False
    #: The socket's user holds ``agent_app.staff_chat`` (read once, at connect).
    staff = False

    async def send_frame(self, frame: OutboundFrame) -> None: ...

    def people_refusal(self, frame: InboundFrame) -> str | None:
        """Why this socket may not send ``frame`` (None: it may)."""
        if isinstance(frame, _STAFF) and not self.staff:
            return NOT_STAFF
        if self.watching and not isinstance(frame, _WATCHING):
            return WATCHING
        return None

    async def route_people(self, frame: InboundFrame) -> bool:
        """Handle a frame of people in the loop; False if ``frame`` is none of them."""
        if isinstance(frame, _STAFF) and not await self._still_staff():
            await self.send_frame(ErrorFrame(code=ErrorCode.FORBIDDEN, message=NOT_STAFF))
            return True
        match frame:
            case FeedbackFrame():
                await self.on_feedback(frame)
            case RequestHumanFrame():
                await self.on_request_human(frame)
            case TakeoverFrame():
                await self._staff_act(people.take_over(self._live(), self._user()), "take")
            case StaffMessageFrame():
                sent = people.staff_message(self._live(), self._user(), frame.content)
                await self._staff_act(sent, "write")
            case HandBackFrame():
                await self._staff_act(people.hand_back(self._live()), "hand back")
            case _:
                return False
        return True

    async def _still_staff(self) -> bool:
        """The permission, read again for each staff frame: taking it away works at once
        (the socket's user object keeps the permissions it read at connect)."""
        user = self._user()
        pk = getattr(user, "pk", None)

        def read() -> bool:
            fresh = get_user_model()._default_manager.filter(pk=pk, is_active=True).first()
            return is_staff(fresh)

        self.staff = pk is not None and await database_sync_to_async(read)()
        return self.staff

    def _live(self) -> LiveSession:
        assert self.live is not None
        return self.live

    def _user(self) -> Any:
        return self.scope.get("user")

    async def _staff_act(self, action: Any, what: str) -> None:
        if not await action:
            reasons = {
                "take": "There is nothing to take over: this chat has no message yet",
                "write": "Take the chat over before writing in it",
                "hand back": "This chat is not taken over",
            }
            await self.send_frame(ErrorFrame(code=ErrorCode.BAD_FRAME, message=reasons[what]))

    async def on_feedback(self, frame: FeedbackFrame) -> None:
        person = self.person
        assert person is not None
        try:
            feedback, _ = await database_sync_to_async(records.rate)(
                visible_sessions(person),
                person.key,
                person.user_id,
                frame.message_id,
                frame.rating,
                frame.comment,
                request_id=frame.request_id,
            )
        except records.NotYours:
            which = frame.message_id or frame.request_id
            message = f"There is no answer {which} in your chats to rate"
            await self.send_frame(ErrorFrame(code=ErrorCode.BAD_FRAME, message=message))
            return
        await self.send_frame(FeedbackSavedFrame(**records.feedback_item(feedback)))

    async def on_request_human(self, frame: RequestHumanFrame) -> None:
        if not await people.request_human(self._live(), frame.reason.strip()):
            message = "Write your question first: this chat has no message yet"
            await self.send_frame(ErrorFrame(code=ErrorCode.BAD_FRAME, message=message))


async def staff_of_socket(user: Any, person: Person | None, session_id: str) -> tuple[bool, bool]:
    """``(staff, watching)``: whether the socket's user holds ``agent_app.staff_chat``,
    and whether it opens a stored chat of someone else as staff (one thread hop)."""

    def read() -> tuple[bool, bool]:
        if person is None or not is_staff(user):
            return False, False
        row = ChatSession.objects.filter(pk=session_id).first()
        return True, row is not None and not may_open(person, row)

    return await database_sync_to_async(read)()
