"""Steering and internal messages waiting for one running request, and the ones it answers.

Replies arrive from any thread (``Agent.emit_external_event``) while the request runs on
its event loop, and a reply may race the request's final answer. One lock orders the two:
a push succeeds only while the inbox is open, and the runtime closes the inbox in the same
locked step in which it finds nothing left to answer. So a message is accepted if and only
if the request will process it: never lost, never delivered twice.

``max_internal`` bounds the internal messages one request answers. A reply from outside
beyond it is refused (an outsider cannot fail someone's request by sending one too many);
one the application's own hooks publish is queued, and the request fails with
``AgentIterationLimitError`` when it would have to answer it, as the upstream library does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.exceptions import AgentIterationLimitError
from zett_agent.messages import AgentMessage, AssistantMessage, UserMessage

__all__ = ["AnsweredInputs", "RequestInbox"]

E = AgentEventType


class RequestInbox:
    """Pending steering and internal messages of one request."""

    __slots__ = (
        "_internal",
        "_internal_accepted",
        "_internal_answered",
        "_lock",
        "_open",
        "_steering",
        "max_internal",
        "on_steering",
        "request_id",
    )

    def __init__(self, request_id: str, max_internal: int) -> None:
        self.request_id = request_id
        self.max_internal = max_internal
        self._lock = threading.Lock()
        self._steering: list[UserMessage] = []
        self._internal: list[AgentMessage] = []
        self._internal_accepted = 0
        self._internal_answered = 0
        self._open = True
        #: Called (from the pushing thread) after a steering message is queued: set while
        #: a model stream may be cut short by one (``zett_agent._interrupt``).
        self.on_steering: Callable[[], None] | None = None

    def push_steering(self, message: UserMessage) -> bool:
        """Queue a steering message; False once the request has settled its final answer."""
        with self._lock:
            if not self._open:
                return False
            self._steering.append(message)
            signal = self.on_steering
        if signal is not None:
            signal()
        return True

    def push_internal(self, message: AgentMessage, *, within_limit: bool = True) -> bool:
        """Queue an internal message; False when closed, or (``within_limit``) when
        ``max_internal`` were accepted already."""
        with self._lock:
            if not self._open or (within_limit and self._internal_accepted >= self.max_internal):
                return False
            self._internal_accepted += 1
            self._internal.append(message)
            return True

    def has_steering(self) -> bool:
        return bool(self._steering)

    def take_steering(self) -> list[UserMessage]:
        """Take every queued steering message (at a checkpoint inside a turn)."""
        with self._lock:
            taken, self._steering = self._steering, []
            return taken

    def take_final(self) -> list[UserMessage] | AgentMessage | None:
        """At a final answer: steering first, then one internal message, else close."""
        with self._lock:
            if self._steering:
                taken, self._steering = self._steering, []
                return taken
            if self._internal:
                if self._internal_answered >= self.max_internal:
                    raise AgentIterationLimitError(
                        f"More than max_internal_messages={self.max_internal} internal "
                        "messages were queued for one request"
                    )
                self._internal_answered += 1
                return self._internal.pop(0)
            self._open = False
            return None

    def close(self) -> None:
        if not (self._open or self._steering or self._internal):
            return  # closed and empty (``take_final``): a closed inbox refuses every push
        with self._lock:
            self._open = False
            self._steering.clear()
            self._internal.clear()


class AnsweredInputs:
    """The steering and the internal message the request is answering now (one of each).

    It only keeps the slots and builds the events that end them; the request emits those,
    so the order of events stays where the request's loop tells it.
    """

    __slots__ = ("internal", "steering")

    def __init__(self) -> None:
        self.steering: UserMessage | None = None
        self.internal: AgentMessage | None = None

    def interrupted(self, session_id: str) -> list[AgentEvent]:
        """End both as interrupted (internal first): a new steering message takes over."""
        events = []
        if self.internal is not None:
            internal, self.internal = self.internal, None
            events.append(
                AgentEvent(E.INTERNAL_MESSAGE_INTERRUPTED, session_id, internal_message=internal)
            )
        if self.steering is not None:
            steering, self.steering = self.steering, None
            events.append(AgentEvent(E.STEERING_INTERRUPTED, session_id, steering_message=steering))
        return events

    def completed(self, session_id: str, answer: AssistantMessage) -> list[AgentEvent]:
        """End both as answered (steering first) by the final ``answer``."""
        events = []
        if self.steering is not None:
            steering, self.steering = self.steering, None
            events.append(AgentEvent(E.STEERING_COMPLETED, session_id, steering_message=steering))
        if self.internal is not None:
            internal, self.internal = self.internal, None
            events.append(
                AgentEvent(
                    E.INTERNAL_MESSAGE_COMPLETED,
                    session_id,
                    internal_message=internal,
                    message=answer,
                )
            )
        return events
