"""The socket's frames that start a turn: ``user_message``, ``regenerate``, ``edit``,
``edit_last`` and ``switch_version`` (mixed into ``ChatConsumer``).

A run starts in the session (``agent_app.sessions.entry.start_run``), within the person's
token budget; the first message stores the chat, bound to its assistant. A chat a person
has taken over stores the message for them and starts no run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app import conf
from agent_app.assistants import UnknownAssistant, registry
from agent_app.attachments.stored import UnknownAttachments, chat_attachment_ids
from agent_app.budgets import BudgetExceeded
from agent_app.durable.branches import NotATurn
from agent_app.durable.chat_records import ChatDeleted
from agent_app.durable.runs import Creator, NothingToReplace
from agent_app.durable.support import TakenOver
from agent_app.guard.access import (
    Creation,
    Person,
    assistant_refusal,
    chat_quota_message,
    ensure_session,
)
from agent_app.models import RunKind
from agent_app.protocol.frames import (
    MAX_ATTACHMENTS,
    ErrorCode,
    OutboundFrame,
    SwitchVersionFrame,
    UserMessageFrame,
)
from agent_app.protocol.refusals import Busy
from agent_app.sessions.branching import switch as switch_version
from agent_app.sessions.entry import start_run
from agent_app.sessions.live import LiveSession
from agent_app.sessions.people import customer_message

__all__ = ["TurnFrames"]


class TurnFrames:
    """Mixed into ``ChatConsumer``: the frames that start a run or show another version."""

    live: LiveSession | None
    person: Person | None
    session_id: str
    scope: Any
    #: The session's row exists (checked at the first ``user_message``).
    _stored = False

    if TYPE_CHECKING:

        async def send_frame(self, frame: OutboundFrame) -> None: ...
        async def _error(self, code: ErrorCode, message: str) -> None: ...
        async def chat_deleted(self) -> None: ...
        async def _account_exists(self) -> bool: ...

    async def on_user_message(self, frame: UserMessageFrame) -> None:
        assert self.live is not None and self.person is not None
        if not await self._account_exists():
            return
        if frame.assistant is not None and registry.get(frame.assistant) is None:
            await self._error(ErrorCode.UNKNOWN_ASSISTANT, str(UnknownAssistant(frame.assistant)))
            return
        attachments: list[str] = []
        if frame.attachments and (attachments := await self._attachments(frame)) is None:
            return
        if not self._stored and not await self._store_session(frame.assistant or ""):
            return
        creator = Creator(self.person.user_id, self.person.browser_key or "")
        try:
            await self._start(frame.content, creator, attachments=attachments)
        except TakenOver:
            await self._to_staff(frame, creator, attachments)
        except (Busy, BudgetExceeded) as refusal:
            await self.send_frame(refusal.frame())
        except ChatDeleted:
            await self.chat_deleted()

    async def _to_staff(
        self, frame: UserMessageFrame, creator: Creator, attachments: list[str]
    ) -> None:
        """A person answers this chat: the message is stored for them, no run starts (if
        it was handed back meanwhile, a run answers it after all)."""
        assert self.live is not None
        if await customer_message(self.live, frame.content, attachments):
            return
        try:
            await self._start(frame.content, creator, attachments=attachments)
        except (Busy, BudgetExceeded) as refusal:
            await self.send_frame(refusal.frame())

    async def _attachments(self, frame: UserMessageFrame) -> list[str] | None:
        """The message's attachment ids if all are this chat's; else say why (None)."""
        most = min(MAX_ATTACHMENTS, int(conf.ZETT_ATTACHMENTS_PER_MESSAGE))
        if len(frame.attachments) > most:
            await self._error(
                ErrorCode.BAD_FRAME, f"A message can carry at most {most} attachments"
            )
            return None
        try:
            return await database_sync_to_async(chat_attachment_ids)(
                self.session_id, frame.attachments
            )
        except UnknownAttachments as unknown:
            await self._error(ErrorCode.BAD_FRAME, str(unknown))
            return None

    async def on_replace_last_turn(
        self, content: str | None, kind: RunKind, position: int | None = None
    ) -> None:
        """``regenerate`` (``content`` None), ``edit`` or ``edit_last``: a new version of
        the turn at ``position`` (None: the last), answered anew."""
        assert self.live is not None
        if not await self._account_exists():
            return
        try:
            await self._start(content, kind=kind, replace_last_turn=True, turn_position=position)
        except (Busy, BudgetExceeded) as refusal:
            await self.send_frame(refusal.frame())
        except NothingToReplace as nothing:
            await self._error(ErrorCode.BAD_FRAME, str(nothing))
        except ChatDeleted:
            await self.chat_deleted()

    async def on_switch_version(self, frame: SwitchVersionFrame) -> None:
        """Show another version of a turn; every socket gets ``branch_switched``."""
        assert self.live is not None
        try:
            await switch_version(self.live, frame.position, frame.index)
        except Busy as refusal:
            await self.send_frame(refusal.frame())
        except NotATurn as wrong:
            await self._error(ErrorCode.BAD_FRAME, str(wrong))

    async def _start(self, content: str | None, *args: Any, **kwargs: Any) -> None:
        """Start a run (``LiveSession.start``) within the person's token budget.

        A session running a run here says so at once, before the budget is asked (which
        may wait for calls in flight), as ``start`` would; ``start`` still decides.
        """
        assert self.live is not None
        await start_run(self.live, self.person, content, *args, **kwargs)

    async def _store_session(self, assistant: str) -> bool:
        """Store the chat at its first message (``agent_app.guard.access.ensure_session``),
        bound to ``assistant`` ("": the default) if the person may use it."""
        assert self.person is not None
        code, why = await database_sync_to_async(assistant_refusal)(
            self.scope.get("user"), self.session_id, assistant or None
        )
        if code:
            await self._error(ErrorCode(code), why)
            return False
        match await ensure_session(self.person, self.session_id, assistant):
            case Creation.FORBIDDEN:
                await self._error(ErrorCode.FORBIDDEN, "This session belongs to someone else")
                return False
            case Creation.QUOTA:
                await self._error(ErrorCode.RATE_LIMITED, chat_quota_message())
                return False
            case Creation.DELETED:
                await self.chat_deleted()
                return False
        self._stored = True
        return True
