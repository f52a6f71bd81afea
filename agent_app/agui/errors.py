"""The error codes of the AG-UI layer, and the exception that carries one.

A refused request body is an ``AguiError`` (the view answers it with its ``status`` and a JSON
``{"code", "message"}``); a refusal that comes after the stream began — a resume for an
interrupt already answered, say — is a ``RUN_ERROR`` event with the same ``code``.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AguiError", "ErrorCode"]


class ErrorCode(StrEnum):
    """Every ``code`` the AG-UI layer gives (``RUN_ERROR.code`` or a refused body's)."""

    #: The body is not JSON (NaN and Infinity are not JSON), or nests too deeply.
    BAD_JSON = "bad_json"
    #: The body is JSON but not a valid ``RunAgentInput``.
    BAD_INPUT = "bad_input"
    #: The body, or the user's message, is over its limit.
    TOO_LARGE = "too_large"
    #: ``threadId`` is not a chat id (a UUID).
    BAD_THREAD_ID = "bad_thread_id"
    #: No ``resume`` and the last message is not a user message with text.
    NO_USER_MESSAGE = "no_user_message"
    #: The user's message holds parts other than text, images and documents (or a file by URL).
    UNSUPPORTED_CONTENT = "unsupported_content"
    #: A file of the user's message was refused as an upload would be (``reason`` says why:
    #: ``too_large``, ``unsupported_type``, ``quota_exceeded`` …).
    ATTACHMENT_REFUSED = "attachment_refused"
    #: A resume entry names an interrupt the thread never had (or no longer has).
    UNKNOWN_INTERRUPT = "unknown_interrupt"
    #: A resume entry's status or payload does not answer its interrupt.
    INVALID_RESUME = "invalid_resume"
    #: The interrupt passed its ``expiresAt`` unanswered.
    INTERRUPT_EXPIRED = "interrupt_expired"
    #: The interrupt was answered already (by this or another client, a tab, a socket).
    INTERRUPT_ANSWERED = "interrupt_answered"
    #: An approval for other arguments than the ones shown (its ``digest``).
    DIGEST_MISMATCH = "digest_mismatch"
    #: New input while the thread's interrupts wait for answers.
    INTERRUPTS_PENDING = "interrupts_pending"
    #: The run failed (the model, a hook, the configuration).
    RUN_FAILED = "run_failed"
    #: The process running the run died; its unfinished tool calls were closed.
    INTERRUPTED = "interrupted"
    #: A paused run's questions passed their deadline unanswered.
    EXPIRED = "expired"
    #: No credentials, or a wrong, revoked or expired API token (HTTP 401).
    UNAUTHORIZED = "unauthorized"
    #: The caller may not do this: a cookie POST without its CSRF token, an assistant the
    #: person may not use (HTTP 403).
    FORBIDDEN = "forbidden"
    #: No such thread or chat for this caller: someone else's is not found either (HTTP 404).
    NOT_FOUND = "not_found"
    #: No assistant of that id is installed, or the thread belongs to another (HTTP 404).
    UNKNOWN_ASSISTANT = "unknown_assistant"
    #: A run of the thread is still going (HTTP 409).
    BUSY = "busy"
    #: No run of the thread is going (a cancel; HTTP 409).
    NOT_RUNNING = "not_running"
    #: Over a per-person limit: requests, open streams, chats an hour (HTTP 429).
    RATE_LIMITED = "rate_limited"
    #: The person's token budget of the day is used up (HTTP 429 before a run; a run that
    #: passes it mid-way ends in ``RUN_ERROR`` with this code).
    BUDGET_EXCEEDED = "budget_exceeded"
    #: The server failed handling the request (logged on the server).
    INTERNAL = "internal"


class AguiError(Exception):
    """A request the AG-UI layer refuses: ``code`` for programs, ``message`` for people."""

    def __init__(self, code: ErrorCode, message: str, *, status: int = 400, **details: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        #: More fields of the JSON body (``resets_at`` of ``budget_exceeded``).
        self.details = details

    def as_dict(self) -> dict[str, str]:
        """The JSON body of the refusal."""
        return {"code": self.code.value, "message": self.message, **self.details}
