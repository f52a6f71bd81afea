"""A steering message that cuts a model call short (``agent.steering_interrupts_stream = True``).

By default steering is read at checkpoints: after each model response and after each tool.
With the opt-in, a steering message that arrives while a model call streams ends that call
at once, as long as the call has streamed only text and reasoning (a call that has begun a
tool call or a server tool is left to finish; its steering is read at the usual checkpoint):

- between two items of the stream, the runtime sees the queued message after handing the
  last delta over, and stops reading;
- while the provider is silent (before its first token, or between two), the inbox's
  ``on_steering`` signal schedules ``Driver.interrupt`` on the request's loop, which
  cancels the future the runtime awaits inside the provider's stream, as ``Task.cancel``
  would. The ``CancelledError`` it reads there is recognised as this interruption (the
  watch fired, and no real cancellation is under way) and goes no further;
- a steer already waiting when the call starts (it came during ``before_model``) is
  signalled at once: the call's layers open as usual and it is cut at its first wait.

Either way the stream is closed (``aclose``) and the call returns a partial response: the
text (and reasoning) streamed so far, ``finish_reason`` ``"interrupted"``, the message
marked ``attributes["interrupted"] = True``, and no usage (providers report usage at the end
of a stream). The turn then ends as a final answer would, so the steering message is taken
like any other (docs/runtime.md, Steering).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from zett_agent.messages import AssistantMessage
from zett_agent.model import ModelResponse

if TYPE_CHECKING:
    from zett_agent._driver import Driver
    from zett_agent._inbox import RequestInbox

__all__ = ["INTERRUPTED", "StreamWatch", "was_cut"]

#: ``ModelResponse.finish_reason`` and the message attribute of a call a steer cut short.
INTERRUPTED = "interrupted"


class StreamWatch:
    """Watches one model call for a steering message; collects what it streamed."""

    __slots__ = ("_driver", "_inbox", "_loop", "armed", "fired", "reasoning", "text")

    def __init__(self, inbox: RequestInbox, driver: Driver | None) -> None:
        self._inbox = inbox
        self._driver = driver
        self._loop = asyncio.get_running_loop()
        self.armed = True
        #: The driver cut the runtime's wait short for a steer.
        self.fired = False
        self.text: list[str] = []
        self.reasoning: list[str] = []
        inbox.on_steering = self._signal
        if inbox.has_steering():
            # One came before the call: cut it at its first wait, so the call's own layers
            # (``on_model_request``) still open and close as for any call.
            self._signal()

    def _signal(self) -> None:
        """From the thread that queued the steer: interrupt on the request's loop."""
        self._loop.call_soon_threadsafe(self._interrupt)

    def _interrupt(self) -> None:
        driver = self._driver
        # Once only: a second steer must not cut whatever the runtime awaits next.
        if self.armed and not self.fired and driver is not None and driver.interrupt():
            self.fired = True

    def disarm(self) -> None:
        """From here on the call runs to its end (a tool call began, or it completed)."""
        if self.armed:
            self.armed = False
            if self._inbox.on_steering == self._signal:
                self._inbox.on_steering = None

    def cut_short(self) -> bool:
        """A ``CancelledError`` read in the stream is this watch's interruption."""
        driver = self._driver
        return self.fired and driver is not None and not driver.cancelled

    def response(self) -> ModelResponse:
        """The partial answer: what the person has seen of this call."""
        message = AssistantMessage(
            "".join(self.text),
            reasoning="".join(self.reasoning) or None,
            attributes={INTERRUPTED: True},
        )
        return ModelResponse(message, finish_reason=INTERRUPTED)


def was_cut(response: ModelResponse) -> bool:
    """``response`` is the partial answer of a call a steer cut short."""
    return (
        response.finish_reason == INTERRUPTED
        and response.message.attributes.get(INTERRUPTED) is True
    )
