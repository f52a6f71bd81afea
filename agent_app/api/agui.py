"""The AG-UI endpoints: a run as Server-Sent Events, re-attaching, capabilities.

- ``POST api/ag-ui/<assistant>/`` (``run``): a ``RunAgentInput``. Without ``resume`` its
  last message starts a run of the thread (a new thread is stored, owned by the caller, as
  a socket's first message stores a chat); with ``resume`` the answers go through the one
  reply path every socket's replies take (``agent_app.sessions.entry.audited_reply``:
  audit row, exactly-once claim, digest, deadline) and the stream shows the run going on.
- ``GET api/ag-ui/threads/<thread>/events`` (``thread_events``): the active run's events
  after ``Last-Event-ID`` (or ``?after_seq=``), then live.
- ``GET api/ag-ui/<assistant>/capabilities`` (``capabilities_of``).

Everything that can be refused is refused before the stream begins (a JSON answer with a
status, ``agent_app.api.common.refusal``), except what AG-UI wants as a stream: a resume
that names no interrupt of the thread, or one answered or expired meanwhile, is a 200
stream that ends in ``RUN_ERROR`` with the code. The stream itself is
``agent_app.api.stream``; the mapping of frames to events is ``agent_app.agui``, and the
contract of both is docs/http-api.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from agent_app.agui.attachments import store_parts
from agent_app.agui.capabilities import capabilities
from agent_app.agui.encoder import RunEncoder, refusal_events
from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.agui.interrupts import refusal_code, replies_for
from agent_app.agui.run_input import RunRequest, parse_run_input
from agent_app.agui.sse import CONTENT_TYPE, SSE_HEADERS, encode_events
from agent_app.api.auth import Caller, caller_of
from agent_app.api.common import (
    NOT_FOUND_MESSAGE,
    authorized,
    charge,
    chat_id,
    checked_chat,
    own_chat,
    refusal,
)
from agent_app.api.stream import ThreadStream, detached, on_orm_thread
from agent_app.api.thread_row import chat_with_waits
from agent_app.assistants import Assistant, registry
from agent_app.budgets import BudgetExceeded
from agent_app.durable.chat_records import ChatDeleted
from agent_app.durable.orm_thread import orm_call
from agent_app.durable.runs import Creator
from agent_app.guard.access import Creation, chat_quota_message, ensure_session
from agent_app.guard.bodies import api_body_limit, body_limit
from agent_app.guard.limits import SocketTicket, limiter
from agent_app.models import ChatSession, ReplyWait, WaitKind, WaitStatus
from agent_app.protocol.frames import Refusal
from agent_app.protocol.refusals import Busy
from agent_app.sessions.backpressure import transport_of_request
from agent_app.sessions.entry import audited_reply, start_run
from agent_app.sessions.replies import Verdict

__all__ = ["capabilities_of", "run", "thread_events"]


# --- the views -----------------------------------------------------------------------------


@csrf_exempt  # checked by ``caller_of`` for cookie requests only (a token needs none)
@body_limit(api_body_limit)  # refused before it is read (under daphne)
async def run(request: HttpRequest, assistant_id: str) -> HttpResponse:
    """Start a run (or resume one) and stream it (see the module docstring)."""
    if request.method != "POST":
        return _not_allowed("POST")
    try:
        # On the thread the runs' ORM work runs in, whose connection stays open.
        post = await on_orm_thread(_read_post_call, request, assistant_id)
        await charge(post.caller)
        if post.refused is not None:
            raise post.refused
        assert post.wanted is not None and post.thread is not None
        if post.wanted.resume:
            return await _resume(request, post.caller, post.thread, post.wanted)
        return await _new_message(request, post.caller, post.thread, post.wanted)
    except AguiError as error:
        return refusal(error)


@dataclass(frozen=True, slots=True)
class _Thread:
    """What a POST needs to know of its thread, read in one trip to the database."""

    assistant: Assistant
    #: The stored chat; None for a thread never used (a new message stores it).
    chat: ChatSession | None
    #: A question or approval of the thread waits for its answer (in time).
    pending: bool = False
    #: Every wait the thread ever had (interrupt id → kind) and its run, for a resume.
    kinds: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)
    #: The thread's stored last ``seq`` when no run of it waits to be settled: the stream
    #: joins the live session with it instead of reading both again (``ThreadStream.open``).
    stored_last_seq: int | None = None


@dataclass(frozen=True, slots=True)
class _Post:
    """A POST as read in one trip to a thread: who calls, then what they sent and their
    thread, or why that is refused. ``run`` raises ``refused`` only after charging the
    caller's budget: who calls is judged first, then how often, then what they sent."""

    caller: Caller
    wanted: RunRequest | None = None
    thread: _Thread | None = None
    refused: AguiError | None = None


def _read_post(request: HttpRequest, assistant_id: str) -> _Post:
    """Everything a POST reads before its run, in one thread hop (each hop costs a
    thread switch each way, which under load was most of a POST's time before its first
    byte)."""
    caller = caller_of(request)
    try:
        _installed(assistant_id)
        wanted = parse_run_input(_body_of(request))
        return _Post(caller, wanted, _thread_of(caller, assistant_id, wanted))
    except AguiError as error:
        return _Post(caller, refused=error)


#: ``_read_post`` by the lean hop to the runs' ORM thread (``on_orm_thread``).
_read_post_call = orm_call(_read_post)


def _thread_of(caller: Caller, assistant_id: str, wanted: RunRequest) -> _Thread:
    assistant = _permitted(_installed(assistant_id), caller)
    thread_id = wanted.thread_id
    # One statement: the chat, whether a question waits, whether a dead process left a run.
    chat = checked_chat(caller.person, thread_id, chat_with_waits(thread_id), missing_ok=True)
    if chat is not None and (chat.assistant or registry.default_id()) != assistant.id:
        raise AguiError(
            ErrorCode.UNKNOWN_ASSISTANT,
            f"This thread talks to the assistant {chat.assistant!r}; post to its endpoint",
            status=404,
        )
    if chat is None:
        return _Thread(assistant, None)
    if wanted.resume:
        return _Thread(assistant, chat, False, *_interrupts_of(thread_id))
    if chat.waiting:
        return _Thread(assistant, chat, True)
    stored_last_seq = None if chat.unsettled else chat.last_event_seq
    return _Thread(assistant, chat, stored_last_seq=stored_last_seq)


@csrf_exempt
async def thread_events(request: HttpRequest, thread_id: str) -> HttpResponse:
    """Re-attach: the active run's events after the client's last id, then live."""
    if request.method != "GET":
        return _not_allowed("GET")
    try:
        caller = await authorized(request)
        session_id = chat_id(thread_id)
        await own_chat(caller.person, session_id)
        after_seq = _last_event_id(request)
        stream = _stream(request, caller, session_id)
        try:
            await stream.open(after_seq)
            if stream.beyond(after_seq):
                raise AguiError(
                    ErrorCode.BAD_INPUT,
                    f"Last-Event-ID {after_seq} is past the thread's last event "
                    f"({stream.known_seq}): re-attach with the last id you received",
                )
        except BaseException:
            stream.close()
            raise
    except AguiError as error:
        return refusal(error)
    answered = await sync_to_async(_answered_waits)(session_id)
    encoder = RunEncoder(session_id, after_seq=after_seq, answered=answered)
    return _event_stream(stream.sse(encoder, stop_when_idle=True))


@csrf_exempt
async def capabilities_of(request: HttpRequest, assistant_id: str) -> HttpResponse:
    """The assistant's AG-UI capabilities document."""
    if request.method != "GET":
        return _not_allowed("GET")
    try:
        caller = await authorized(request)
        assistant = await sync_to_async(_permitted)(_installed(assistant_id), caller)
    except AguiError as error:
        return refusal(error)
    thread = "00000000-0000-0000-0000-000000000000"
    events = reverse("agent_app:agui_events", kwargs={"thread_id": thread})
    document = capabilities(
        assistant_id=assistant.id,
        name=assistant.display_name,
        description=getattr(assistant, "description", None),
        events_path=events.replace(thread, "<threadId>"),
    )
    return JsonResponse(document)


# --- a new message -------------------------------------------------------------------------


async def _new_message(
    request: HttpRequest, caller: Caller, thread: _Thread, wanted: RunRequest
) -> HttpResponse:
    person, thread_id = caller.person, wanted.thread_id
    if thread.pending:
        raise AguiError(
            ErrorCode.INTERRUPTS_PENDING,
            "The thread's interrupts wait for answers: resume them first",
            status=409,
        )
    if thread.chat is None:
        match await ensure_session(person, thread_id, thread.assistant.id):
            case Creation.FORBIDDEN | Creation.DELETED:
                raise AguiError(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE, status=404)
            case Creation.QUOTA:
                raise AguiError(ErrorCode.RATE_LIMITED, chat_quota_message(), status=429)
    attachments: list[str] = []
    if wanted.files:
        attachments = await sync_to_async(store_parts)(thread_id, person.key, wanted.files)
    stream = _stream(request, caller, thread_id)
    try:
        await stream.open(stored_last_seq=thread.stored_last_seq)
        assert stream.live is not None and wanted.text is not None
        creator = Creator(person.user_id, person.browser_key or "")
        request_id = await detached(
            start_run(stream.live, person, wanted.text, creator, attachments=attachments)
        )
    except Busy as busy:
        stream.close()
        raise AguiError(ErrorCode.BUSY, busy.message, status=409) from None
    except BudgetExceeded as spent:
        stream.close()
        resets_at = spent.frame().resets_at
        raise AguiError(
            ErrorCode.BUDGET_EXCEEDED, spent.message, status=429, resets_at=resets_at
        ) from None
    except ChatDeleted:
        stream.close()
        raise AguiError(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE, status=404) from None
    except BaseException:
        stream.close()
        raise
    encoder = RunEncoder(thread_id, after_seq=stream.last_seq)
    # RUN_STARTED first, then the MESSAGES_SNAPSHOT, which the run's own message ends.
    return _event_stream(stream.sse(encoder, run_id=request_id, snapshot=True))


# --- a resume ------------------------------------------------------------------------------


async def _resume(
    request: HttpRequest, caller: Caller, thread: _Thread, wanted: RunRequest
) -> HttpResponse:
    thread_id, kinds, runs = wanted.thread_id, thread.kinds, thread.runs
    if thread.chat is None:
        # No thread: no interrupt to answer (and nothing to store).
        return _refused_stream(
            thread_id,
            wanted.client_run_id,
            ErrorCode.UNKNOWN_INTERRUPT,
            "This thread has no interrupts",
        )
    try:
        replies = replies_for(wanted.resume, kinds)
    except AguiError as error:
        if error.code is not ErrorCode.UNKNOWN_INTERRUPT:
            raise
        return _refused_stream(thread_id, wanted.client_run_id, error.code, error.message)
    run_id = runs.get(wanted.resume[0].interrupt_id) or wanted.client_run_id
    stream = _stream(request, caller, thread_id)
    try:
        await stream.open()
        assert stream.live is not None
        for index, reply in enumerate(replies):
            verdict = await detached(
                audited_reply(stream.live, reply.name, reply.payload, _unheard, caller.user)
            )
            if verdict is None:
                stream.close()
                raise AguiError(
                    ErrorCode.INTERNAL,
                    "The answer could not be recorded, so it was not delivered",
                    status=500,
                )
            if not verdict.accepted_by:
                stream.close()
                code = refusal_code(verdict.reason)
                message = _refusal_message(code, verdict.detail)
                if index == 0 and code in (ErrorCode.INVALID_RESUME, ErrorCode.TOO_LARGE):
                    # Nothing was delivered: the body itself is at fault (a field the
                    # question refuses), as for any other bad resume.
                    raise AguiError(code, f"resume[0]: {message}", status=400)
                return _refused_stream(thread_id, run_id, code, message)
    except BaseException:
        stream.close()
        raise
    answered = [reply.payload["tool_call_id"] for reply in replies]
    encoder = RunEncoder(thread_id, after_seq=stream.last_seq, answered=answered)
    return _event_stream(stream.sse(encoder))


def _answered_waits(thread_id: str) -> list[str]:
    """The thread's waits that were answered: a continuation asks them again, and a
    re-attached stream must not show them as interrupts."""
    done = (WaitStatus.ANSWERED, WaitStatus.EXECUTING, WaitStatus.DONE)
    waits = ReplyWait.objects.filter(session_id=thread_id, status__in=done)
    return list(waits.values_list("tool_call_id", flat=True))


def _interrupts_of(thread_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The thread's interrupts (every question and approval it ever had, answered or not):
    kind and run. A host-page tool's call is no interrupt: a page's script answers it."""
    kinds: dict[str, Any] = {}
    runs: dict[str, str] = {}
    people = (WaitKind.ASK_USER, WaitKind.APPROVAL)
    waits = ReplyWait.objects.filter(session_id=thread_id, kind__in=people).order_by("created_at")
    rows = waits.values_list("tool_call_id", "kind", "request_id", "payload__source")
    for tool_call_id, kind, request_id, source in rows:
        mcp = kind == WaitKind.ASK_USER and source == "mcp"
        kinds[tool_call_id], runs[tool_call_id] = "mcp" if mcp else kind, request_id
    return kinds, runs


async def _unheard(verdict: Verdict) -> None:
    """A resume hears its verdict as the ``audited_reply`` result, not through a frame."""


_REFUSAL_MESSAGES = {
    ErrorCode.INTERRUPT_ANSWERED: "The interrupt was answered already",
    ErrorCode.INTERRUPT_EXPIRED: "The interrupt expired: nobody answered it in time",
    ErrorCode.DIGEST_MISMATCH: "The approval is for other arguments than the ones shown",
    ErrorCode.UNKNOWN_INTERRUPT: "No run waits for this interrupt",
}


def _refusal_message(code: ErrorCode, detail: str | None = None) -> str:
    """What a refused answer is told: the reply path's reason in words when it gave one
    (it names the field an MCP question refused), else the code's standing text."""
    if detail:
        return detail
    return _REFUSAL_MESSAGES.get(code, "The answer was refused")


def _refused_stream(thread_id: str, run_id: str, code: ErrorCode, message: str) -> HttpResponse:
    events = refusal_events(thread_id, run_id, code, message)

    async def once() -> AsyncIterator[str]:
        yield encode_events(events)

    return _event_stream(once())


# --- shared --------------------------------------------------------------------------------


def _installed(assistant_id: str) -> Assistant:
    assistant = registry.get(assistant_id)
    if assistant is None:
        raise AguiError(
            ErrorCode.UNKNOWN_ASSISTANT, f"No assistant {assistant_id!r} is installed", status=404
        )
    return assistant


def _permitted(assistant: Assistant, caller: Caller) -> Assistant:
    if not assistant.has_permission(caller.user):
        raise AguiError(
            ErrorCode.FORBIDDEN,
            f"You may not chat with the assistant {assistant.display_name!r}",
            status=403,
        )
    return assistant


def _body_of(request: HttpRequest) -> bytes:
    """The request body; Django refuses one over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` itself."""
    try:
        return request.body
    except RequestDataTooBig:
        raise AguiError(
            ErrorCode.TOO_LARGE,
            f"The body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes",
            status=413,
        ) from None


def _stream(request: HttpRequest, caller: Caller, thread_id: str) -> ThreadStream:
    """A stream of the thread for ``caller``: one of their sockets in the limits, ended
    when the API token it was opened with ends, or when the client leaves too much unread
    on the request's connection."""
    return ThreadStream(
        thread_id,
        _ticket(caller, thread_id),
        token_id=caller.token_id,
        transport=transport_of_request(request),
    )


def _ticket(caller: Caller, thread_id: str) -> SocketTicket:
    """A stream counts as a socket in the per-person and per-chat limits."""
    try:
        return limiter().open_socket(caller.person.key, thread_id)
    except Refusal as refused:
        raise AguiError(ErrorCode.RATE_LIMITED, refused.message, status=429) from None


def _last_event_id(request: HttpRequest) -> int:
    """The last ``seq`` the client saw: ``Last-Event-ID``, else ``?after_seq=``, else 0."""
    raw = request.headers.get("Last-Event-ID")
    if raw is None:
        raw = request.GET.get("after_seq")
    if raw is None or not raw.strip():
        return 0
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise AguiError(
            ErrorCode.BAD_INPUT, f"Last-Event-ID must be an event id (an integer >= 0), got {raw!r}"
        )
    return value


def _event_stream(body: AsyncIterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type=CONTENT_TYPE)
    for name, value in SSE_HEADERS.items():
        response[name] = value
    return response


def _not_allowed(method: str) -> HttpResponse:
    error = AguiError(ErrorCode.BAD_INPUT, f"Use {method}", status=405)
    response = refusal(error)
    response["Allow"] = method
    return response
