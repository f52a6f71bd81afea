"""Why a session refuses a request: ``Busy`` (a run is active) and ``NotRunning`` (none is).

Both are ``agent_app.protocol.frames.Refusal``s: their ``code`` is the ``error`` frame's.
Every layer that starts or replies to a run raises or catches them, so they sit here.
"""

from __future__ import annotations

from agent_app.protocol.frames import ErrorCode, Refusal

__all__ = ["Busy", "NotRunning"]


class Busy(Refusal):
    """A request of this session is already running (or this process is shutting down).

    ``request_id`` is the running request's, None when it is not known here (it runs on
    another worker that is letting it go, or this process shuts down).
    """

    def __init__(self, request_id: str | None, message: str | None = None) -> None:
        if message is None:
            running = "A request" if request_id is None else f"Request {request_id}"
            message = (
                f"{running} of this session is still running; wait for it to finish or send cancel"
            )
        super().__init__(ErrorCode.BUSY, message)
        self.request_id = request_id


class NotRunning(Refusal):
    """No request of this session is running."""

    def __init__(self, message: str = "No request is running to cancel") -> None:
        super().__init__(ErrorCode.NOT_RUNNING, message)
