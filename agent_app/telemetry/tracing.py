"""The app's OpenTelemetry spans: the runtime's, plus waits and continuations.

``ZETT_OTEL`` is read when a chat's agent is built (``extension_for``): on, the agent gets
a ``TracingExtension`` (the runtime's ``TracingExtension`` for the chat's assistant:
``invoke_agent <assistant>``, ``chat <model>``, ``execute_tool <tool>``, with
``gen_ai.conversation.id`` = the chat id) whose spans go to the global tracer provider;
``ZETT_OTEL_CONTENT`` adds the content. Off, this module imports nothing of
``opentelemetry`` and every function here returns at once.

What only the app knows:

- **Where a run's trace lives.** A run's traceparent is stored with its row
  (``ChatRun.trace_context``) when it first waits and when it ends, in writes it makes
  anyway. The row is what every worker shares, so it is how the trace context crosses
  processes: a run continued after a crash, a deploy or a
  wait of hours — on whichever worker takes the reply — reads it there
  (``agent_app.telemetry.context``).
- **Continuations link.** A continuation run (``kind`` ``resume``) starts a trace of its
  own, parented like any run (below), with a span link to the run it continues.
- **Waits are spans.** A question or approval becomes a span ``wait ask_user`` /
  ``wait approval`` from when it was asked to when it ended (answered, approved, denied,
  expired, cancelled), a child of the run that asked, recorded by whichever process learns
  the outcome (``agent_app.telemetry.waits``).
- **The request that started a run is its parent.** A run's task is created by the socket
  or HTTP request that starts it and inherits its context: with Django's or ASGI's
  instrumentation installed, that request's span is the run's parent.
"""

from __future__ import annotations

from agent_app import conf
from zett_agent.extensions.tracing import TracingExtension

__all__ = ["active", "extension_for"]


def active() -> bool:
    """Whether spans are recorded (``ZETT_OTEL``)."""
    return bool(conf.ZETT_OTEL)


#: One extension per (assistant, content recording), shared by that assistant's agents.
_EXTENSIONS: dict[tuple[str, bool], TracingExtension] = {}


def extension_for(assistant: str) -> TracingExtension | None:
    """The tracing extension of an agent of ``assistant``; None with ``ZETT_OTEL`` off."""
    if not active():
        return None
    key = (assistant, bool(conf.ZETT_OTEL_CONTENT))
    extension = _EXTENSIONS.get(key)
    if extension is None:
        extension = _EXTENSIONS[key] = TracingExtension(assistant, record_content=key[1])
    return extension
