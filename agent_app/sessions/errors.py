"""Why a session refuses a request: ``Busy`` (a run is active) and ``NotRunning`` (none is)."""

from __future__ import annotations

__all__ = ["Busy", "NotRunning"]


class Busy(Exception):
    """A request of this session is already running (or this process is shutting down)."""

    def __init__(self, request_id: str, message: str | None = None) -> None:
        super().__init__(
            message
            or f"Request {request_id} of this session is still running; "
            "wait for it to finish or send cancel"
        )
        self.request_id = request_id


class NotRunning(Exception):
    """No request of this session is running."""
