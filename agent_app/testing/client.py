"""``ChatClient``: a test's chat with an assistant, through the project's own ASGI stack.

It opens the chat's socket with Channels' ``WebsocketCommunicator`` on the project's
``ASGI_APPLICATION`` (or the application given): the origin check, the session and auth
middleware, the API-token middleware, the consumer's permission and access checks, and the
ORM persistence all run as they do for a page. It speaks the socket protocol
(docs/protocol.md) so a test speaks in messages, approvals and answers instead of frames::

    async with ChatClient(user=alice, assistant="support") as chat:
        await chat.send("Please refund order 7")
        assert chat.pending[0]["tool"] == "refund_order"
        await chat.approve()
        assert "Refunded" in chat.answer_text

Every method that talks to the server returns once the run has *settled*: it ended, or it
waits for a reply (``pending``). Each call is bounded by ``timeout`` seconds in all (a run
that streams forever too) and fails with ``ChatTimeout`` naming what it waited for and the
last frames it saw; the socket is gone after that. A refused frame
raises ``ChatRefused`` with the server's ``code``. A run that failed because of the test's
own setup — a script that ran out (``ScriptExhausted``), a real model request
(``ModelRequestsBlocked``), an ``assert`` inside a script function — raises that error in
the test; any other failure is the run's outcome, read from ``status`` and ``error``.

On exit the socket is closed; when the last client of the event loop closes, runs still
going are cancelled and the loop's live sessions closed, so a test leaves no task behind.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agent_app.testing.script import ScriptExhausted
from agent_app.testing.sessions import (
    browser_cookie,
    close_live_sessions,
    login_cookie,
    session_id_of,
)
from agent_app.testing.transcript import Transcript
from zett_agent.providers.switch import ModelRequestsBlocked

__all__ = ["ChatClient", "ChatRefused", "ChatTimeout"]

#: Failures of a test's own setup: raised in the test rather than read as an outcome.
_SETUP_ERRORS: dict[str, type[Exception]] = {
    "ModelRequestsBlocked": ModelRequestsBlocked,
    "AssertionError": AssertionError,
    "ScriptExhausted": ScriptExhausted,
}
#: The clients open on each event loop: the last one out closes the loop's sessions.
_open_clients: dict[asyncio.AbstractEventLoop, int] = {}


class ChatTimeout(AssertionError):
    """The chat did not reach what a ``ChatClient`` waited for in time."""


class ChatRefused(AssertionError):
    """The server refused a frame or the socket; ``code`` is the server's reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ChatClient:
    """One person's socket on one chat. ``async with`` it.

    ``user``: who chats (a user; None: an anonymous browser); ``token``: chat as a program
    with this API token instead; ``assistant``: the id a new chat is bound to (None: the
    default assistant); ``chat``: the id (or ``ChatSession``) of a chat to open (None: a
    new one); ``application``: the ASGI application (None: ``settings.ASGI_APPLICATION``);
    ``timeout``: seconds any one wait may take.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        user: Any = None,
        assistant: str | None = None,
        chat: Any = None,
        *,
        token: str | None = None,
        application: Any = None,
        timeout: float = 10.0,
    ) -> None:
        self.user = user
        self.assistant = assistant
        self.token = token
        self.timeout = float(timeout)
        #: The chat's id.
        self.id = session_id_of(chat) if chat is not None else str(uuid.uuid4())
        self._application = application
        self._communicator: WebsocketCommunicator | None = None
        self._transcript = Transcript()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sent_message = False

    # --- what the chat said --------------------------------------------------------------

    @property
    def frames(self) -> list[dict[str, Any]]:
        """Every frame the socket received, in order (the ``session`` frame first)."""
        return self._transcript.frames

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every ``AgentEvent`` of the chat's runs, as JSON, in order."""
        return self._transcript.events

    @property
    def pending(self) -> list[dict[str, Any]]:
        """The open waits: ``tool``, ``tool_call_id``, ``kind`` (``approval``, ``ask_user``,
        ``browser_tool``), ``request_id``, ``name``, ``payload``, ``response_event``,
        ``expires_at``."""
        return list(self._transcript.waits.values())

    @property
    def answer_text(self) -> str:
        """The text of the last answer ("" before the first)."""
        return self._transcript.answer_text

    @property
    def status(self) -> str | None:
        """How the last run stands: ``running``, ``waiting`` (for a reply),
        ``completed``, ``failed``, ``cancelled``, ``interrupted``, ``paused``; ``stored``
        when staff have taken the chat over (the message is kept for them, no run starts);
        None before any."""
        transcript = self._transcript
        return "waiting" if transcript.waiting else transcript.status

    @property
    def error(self) -> dict[str, Any] | None:
        """``{"type", "message"}`` of the last run that failed or was interrupted."""
        return self._transcript.error

    @property
    def session(self) -> dict[str, Any]:
        """The ``session`` frame the chat opened with."""
        return self._transcript.frames[0]

    # --- opening and closing ---------------------------------------------------------------

    async def __aenter__(self) -> ChatClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the socket and read the ``session`` frame (and the replay of a run).

        ``ChatRefused`` when the server refuses the socket (it is closed again)."""
        from agent_app.routing import socket_path

        if self._communicator is not None:
            raise RuntimeError("This ChatClient is already connected")
        headers = await self._headers()
        application = self._application or _default_application()
        self._communicator = WebsocketCommunicator(application, socket_path(self.id), headers)
        self._loop = asyncio.get_running_loop()
        _open_clients[self._loop] = _open_clients.get(self._loop, 0) + 1
        try:
            connected, code = await self._communicator.connect(timeout=self.timeout)
            if not connected:
                raise ChatRefused("forbidden", f"the socket of chat {self.id} was refused ({code})")
            first = await self._receive("the session frame")
            if first.get("type") == "error":
                raise ChatRefused(first.get("code", "error"), first.get("message", ""))
            if first.get("active_request_id"):  # a run is going: its replay follows
                self._transcript.status = "sent"
                await self._settle("the replay of the chat's running run to settle")
        except BaseException:
            await self.close()
            raise

    async def _headers(self) -> list[tuple[bytes, bytes]]:
        headers = [(b"user-agent", b"zett-testing-chatclient")]
        if self.token is not None:
            headers.append((b"authorization", f"Bearer {self.token}".encode()))
        elif self.user is not None:
            headers.append((b"cookie", (await sync_to_async(login_cookie)(self.user)).encode()))
        else:
            headers.append((b"cookie", (await sync_to_async(browser_cookie)()).encode()))
        return headers

    async def close(self) -> None:
        """Close the socket; the last client of the loop also stops its sessions."""
        communicator, self._communicator = self._communicator, None
        if communicator is None:
            return
        try:
            await _disconnect(communicator, self.timeout)
        finally:
            loop = self._loop
            left = _open_clients.get(loop, 1) - 1
            if left <= 0:
                _open_clients.pop(loop, None)
                await close_live_sessions(self.timeout)
            else:
                _open_clients[loop] = left

    # --- talking -------------------------------------------------------------------------

    async def send(self, text: str, *, attachments: list[str] | None = None) -> None:
        """Send a message; returns once its run has ended or waits for a reply."""
        frame: dict[str, Any] = {"type": "user_message", "content": text}
        if self.assistant is not None and not self._sent_message:
            frame["assistant"] = self.assistant
        if attachments:
            frame["attachments"] = list(attachments)
        self._transcript.status = "sent"
        await self._send(frame)
        await self._settle(f"the run answering {text[:80]!r} to end or wait for a reply")
        self._sent_message = True  # the chat is stored: bound to its assistant

    async def approve(self, *, tool_call_id: str | None = None) -> None:
        """Approve the single open approval (or the one of ``tool_call_id``)."""
        wait = self._wait("approval", tool_call_id)
        await self._reply(wait, {"approved": True, "digest": wait["payload"].get("digest")})

    async def deny(self, *, tool_call_id: str | None = None) -> None:
        """Deny the single open approval (or the one of ``tool_call_id``)."""
        wait = self._wait("approval", tool_call_id)
        await self._reply(wait, {"approved": False, "digest": wait["payload"].get("digest")})

    async def answer(self, value: Any, *, tool_call_id: str | None = None) -> None:
        """Answer the single open question (or ``tool_call_id``'s): ``value`` is the answer
        (a string, a list of options, an MCP form's object), or a host-page tool's result."""
        wait = self._wait(("ask_user", "browser_tool"), tool_call_id)
        key = "result" if wait["kind"] == "browser_tool" else "answer"
        await self._reply(wait, {key: value})

    async def cancel(self) -> None:
        """Cancel the running run; returns once it has wound down."""
        await self._send({"type": "cancel"})
        await self._settle("the cancelled run to end", cancelling=True)

    # --- plumbing ----------------------------------------------------------------------

    def _wait(self, kinds: str | tuple[str, ...], tool_call_id: str | None) -> dict[str, Any]:
        kinds = (kinds,) if isinstance(kinds, str) else kinds
        waits = [w for w in self.pending if w["kind"] in kinds]
        if tool_call_id is not None:
            found = [w for w in self.pending if w["tool_call_id"] == tool_call_id]
            if not found:
                raise LookupError(
                    f"No open wait has tool_call_id {tool_call_id!r}; open: {self._open_ids()}"
                )
            if found[0]["kind"] not in kinds:
                raise LookupError(f"The wait {tool_call_id!r} is a {found[0]['kind']!r}")
            return found[0]
        if len(waits) != 1:
            what = " or ".join(kinds)
            raise LookupError(
                f"Expected exactly one open {what} to answer, found {len(waits)} "
                f"(open: {self._open_ids()}); pass tool_call_id= to choose"
            )
        return waits[0]

    def _open_ids(self) -> str:
        return ", ".join(f"{w['tool_call_id']} ({w['kind']})" for w in self.pending) or "none"

    async def _reply(self, wait: dict[str, Any], fields: dict[str, Any]) -> None:
        payload = {"tool_call_id": wait["tool_call_id"], **fields}
        name = wait["response_event"] or {"approval": "approval_response"}.get(wait["kind"])
        await self._send({"type": "external_event", "name": name, "payload": payload})
        what = f"the server's answer to the reply to {wait['tool_call_id']!r}"
        deadline = self._deadline()
        while True:
            frame = await self._receive(what, deadline)
            if frame.get("type") == "external_event_result":
                break
            if frame.get("type") == "error":
                raise ChatRefused(frame.get("code", "error"), frame.get("message", ""))
        if not frame.get("accepted_by"):
            raise ChatRefused(frame.get("reason") or "refused", frame.get("message") or what)
        transcript = self._transcript
        transcript.waits.pop(wait["tool_call_id"], None)
        transcript.status = "sent" if transcript.status == "paused" else "running"
        await self._settle(f"the run to go on after the reply to {wait['tool_call_id']!r}")

    async def _send(self, frame: dict[str, Any]) -> None:
        if self._communicator is None:
            raise RuntimeError("The ChatClient is not connected: use `async with ChatClient(...)`")
        if self._communicator.future.done():
            raise RuntimeError(
                "The ChatClient's socket is gone (a wait timed out, or the server closed it)"
            )
        await self._communicator.send_to(text_data=json.dumps(frame))

    def _deadline(self) -> float:
        return asyncio.get_running_loop().time() + self.timeout

    async def _settle(self, what: str, *, cancelling: bool = False) -> None:
        transcript = self._transcript
        deadline = self._deadline()
        while cancelling or not transcript.settled:
            frame = await self._receive(what, deadline)
            kind = frame.get("type")
            if kind == "error":
                raise ChatRefused(frame.get("code", "error"), frame.get("message", ""))
            if cancelling and transcript.status not in ("running", "sent"):
                break
        if transcript.status == "failed" and transcript.error:
            raised = _SETUP_ERRORS.get(transcript.error.get("type"))
            if raised is not None:
                raise raised(transcript.error.get("message"))

    async def _receive(self, what: str, deadline: float | None = None) -> dict[str, Any]:
        """The next frame, read by ``deadline`` (loop time; None: ``timeout`` from now)."""
        communicator = self._communicator
        if communicator is None:
            raise RuntimeError("The ChatClient is not connected")
        left = self.timeout if deadline is None else deadline - asyncio.get_running_loop().time()
        try:
            message = await communicator.receive_output(timeout=max(left, 0.001))
        except TimeoutError:
            raise ChatTimeout(
                f"ChatClient waited {self.timeout:g}s for {what}; the last frames were:\n  "
                f"{self._transcript.describe()}"
            ) from None
        if message["type"] == "websocket.close":
            raise ChatRefused(
                "closed",
                f"the server closed the socket (code {message.get('code')}) while the client "
                f"waited for {what}; the last frames were:\n  {self._transcript.describe()}",
            )
        text = message.get("text") or (message.get("bytes") or b"").decode()
        frame = json.loads(text)
        self._transcript.feed(frame)
        return frame


async def _disconnect(communicator: WebsocketCommunicator, seconds: float) -> None:
    """Close the socket. After a receive timed out, the communicator has cancelled the
    application already: there is nothing left to close, and no second error to raise
    over the first."""
    if communicator.future.done():
        if not communicator.future.cancelled():
            communicator.future.exception()  # retrieved: the test already failed
        return
    await communicator.disconnect(timeout=seconds)


def _default_application() -> Any:
    from channels.routing import get_default_application

    return get_default_application()
