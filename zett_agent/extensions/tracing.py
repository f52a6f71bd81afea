"""``TracingExtension``: OpenTelemetry spans for agent runs, model calls and tool calls.

Spans follow the OpenTelemetry GenAI semantic conventions and go to the global tracer
provider (``opentelemetry.trace.get_tracer_provider()``) unless one is passed in:

- ``invoke_agent <agent name>`` (INTERNAL), one per request, the parent of the others;
  it carries the request's token usage summed over its model calls;
- ``chat <model>`` (CLIENT), one per model call;
- ``execute_tool <tool>`` (INTERNAL), one per tool call that reached its tool hooks. A
  tool the agent does not have (a name the model made up) is ``UNKNOWN_TOOL`` (``other``)
  in the span's name and ``gen_ai.tool.name``, unless content is recorded: the model's
  names are unbounded, and a backend that groups spans by name must not grow with them.

``opentelemetry-api`` is imported when the extension is built (or a wait span recorded),
never when this module is imported, so an application may import the names below whether
or not tracing is installed and turned on.

How a span ends. Phase moves drive the run's and the model calls' spans: LOADING_CONTEXT
starts the run's, GENERATING a model call's (``after_model`` ends it with the response),
COMPLETED ends the run's; RUNNING_TOOL (after every ``before_tool``: an approval wait
there has a span of its own) starts a tool call's, which ``after_tool`` ends.
A failure (``on_error``) ends every open span with the error's ``error.type``. A
cancellation (the consumer closed the stream, the task was cancelled, the process is
shutting down) is not an error: the move to CANCELLED (or ``RunCancelledEvent``) ends
the open spans marked ``zett.outcome = cancelled``. A tool call the person declined or
let expire (its result says so in ``attributes["reply"]``, as the approval extension
records it) is not an error either.

Cost. With no SDK behind the API (no global provider set yet, or a ``NoOpTracerProvider``)
a request leaves the extension out from its start (``_takes_part``, asked once when the
request is claimed): no hook is called and no event built for it. Otherwise the sampler
decides once per run: the SDK's when the request is claimed (a run it drops is left out
the same way), another implementation's when the run's span starts. A dropped run builds
no attributes, no child span and no context, and the extension is out of the request's
hooks (from its start, or withdrawn, ``AgentRunContext.withdraw``), so the rest of the
request neither calls it nor builds the events it would have listened to. A recorded run
hears only the phase moves that open or close a span, never the appended messages, and
hears them in ``_on_move``, called where the phase moves: no event object, clock read or
coroutine for a move no other listener hears (``zett_agent._hooks``). Content (messages,
tool arguments and results, error texts) is recorded only with ``record_content=True``.

Context. The run span is the current span while the request runs (its model calls and tool
bodies see it, or their own span), so instrumented HTTP clients and database drivers nest
under it. Its parent is the current span of whoever started iterating the request, or the
W3C ``traceparent`` given in the request's metadata under ``TRACE_PARENT``; traceparents
under ``TRACE_LINKS`` become span links (a continuation run links the run it continues).
``traceparent(session_id)`` gives the running request's span as a traceparent, to carry it
to another worker; ``record_wait_span`` records a human wait (question, approval) after
the fact, from wherever its outcome became known. Those traceparents in and out, and the
wait spans, live in ``zett_agent.extensions._trace_context`` (its public names are
importable from here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from zett_agent.extensions._genai_attributes import (
    ModelSpans,
    chat_input,
    finish_reasons,
    usage_attributes,
)
from zett_agent.extensions._genai_content import (
    content_json,
    message_json,
    output_json,
    to_json,
)
from zett_agent.extensions._trace_context import (
    INSTRUMENTATION,
    TRACE_LINKS,
    TRACE_PARENT,
    WAIT_OUTCOMES,
    current_traceparent,
    otel,
    parent_context,
    record_wait_span,
    span_links,
    traceparent_of,
)
from zett_agent.extensions._trace_sampling import Decision, RunSampler
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import PhaseTransitionEvent, RunCancelledEvent
from zett_agent.extensions.external import ExternalEventExpired
from zett_agent.messages import AssistantMessage
from zett_agent.phases import AgentPhase
from zett_agent.tools.base import current_tool_call_id

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, TracerProvider

    from zett_agent._context import AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent
    from zett_agent.messages import ToolCall
    from zett_agent.model import ModelResponse
    from zett_agent.tools.base import ToolResult

__all__ = [
    "TRACE_LINKS",
    "TRACE_PARENT",
    "UNKNOWN_TOOL",
    "WAIT_OUTCOMES",
    "TracingExtension",
    "current_traceparent",
    "record_wait_span",
    "tool_outcome",
]

#: The tool name of a span for a tool the agent does not have (without content recording).
UNKNOWN_TOOL = "other"
_COMPLETED, _FAILED, _CANCELLED = "completed", "failed", "cancelled"
_LOADING_CONTEXT, _GENERATING = AgentPhase.LOADING_CONTEXT, AgentPhase.GENERATING
_RUNNING_TOOL = AgentPhase.RUNNING_TOOL
_COMPLETED_PHASE, _CANCELLED_PHASE = AgentPhase.COMPLETED, AgentPhase.CANCELLED


class TracingExtension(AgentExtension):
    """Emit ``invoke_agent`` / ``chat`` / ``execute_tool`` spans for every request.

    ``agent_name`` names the agent in span names and ``gen_ai.agent.name`` (an application
    passes its assistant's id); ``agent_id`` is ``gen_ai.agent.id`` (default: the name).
    ``record_content`` adds the messages, tool arguments and
    results and error texts to the spans. ``tracer_provider`` defaults to the global one.
    """

    #: Last in every stage: a tool call's outcome is read after the other extensions'
    #: ``after_tool`` (which say whether the person declined it), and a model call's span
    #: ends after their ``after_model``.
    priority = 1000

    def __init__(
        self,
        agent_name: str | None = None,
        *,
        record_content: bool = False,
        tracer_provider: TracerProvider | None = None,
        agent_id: str | None = None,
    ) -> None:
        api = otel()
        if agent_name is not None and (not isinstance(agent_name, str) or not agent_name):
            raise ValueError(f"agent_name must be a non-empty str or None, got {agent_name!r}")
        if agent_id is not None and (not isinstance(agent_id, str) or not agent_id):
            raise ValueError(f"agent_id must be a non-empty str or None, got {agent_id!r}")
        self.agent_name = agent_name
        self.agent_id = agent_id or agent_name
        self.record_content = bool(record_content)
        self._api = api
        self._sampling = RunSampler(api, INSTRUMENTATION, tracer_provider)
        # Looked up once: every recorded span is attached and detached through them.
        self._attach = api.context.attach
        self._in_context = api.trace.set_span_in_context
        self._internal, self._client = api.trace.SpanKind.INTERNAL, api.trace.SpanKind.CLIENT
        self._run_name = f"invoke_agent {agent_name}" if agent_name else "invoke_agent"
        self._runs: dict[AgentRunContext, _Run] = {}
        #: The sampler's answer for a recorded run, from its claim to its start.
        self._decisions: dict[AgentRunContext, Decision] = {}
        #: The last model seen and what its spans say of it (a request's model is usually
        #: the agent's: its identity and server are worked out once, not per span).
        self._model: tuple[object, ModelSpans] | None = None

    # -- seams for the application -------------------------------------------------------

    def traceparent(self, session_id: str, tool_call_id: str | None = None) -> str | None:
        """The W3C traceparent of the session's running request (or of one of its open
        tool calls), or None when there is none or it is not recorded."""
        for run in list(self._runs.values()):
            if run.session_id == session_id:
                span = run.span
                if tool_call_id is not None:
                    tool = run.tools.get(tool_call_id)
                    if tool is None:
                        return None
                    span = tool.span
                return traceparent_of(span)
        return None

    # -- hooks -----------------------------------------------------------------------------

    #: The events this extension needs (``zett_agent._hooks``): the moves that open or close
    #: a span, no appended messages.
    _phase_events = frozenset(
        {_LOADING_CONTEXT, _GENERATING, _RUNNING_TOOL, _COMPLETED_PHASE, _CANCELLED_PHASE}
    )
    _message_events = False

    def _takes_part(self, context: AgentRunContext) -> bool:
        """Asked when a request is claimed: False leaves this extension out of it from the
        start, so the runtime builds no event for it. Nothing can be recorded with no SDK
        behind the API (no provider set yet: asked each run, so a provider set later is
        honoured); a compaction pass has no span; and with the SDK its sampler is asked
        here, once per run (its answer for a recorded run is kept for the run's span,
        started when the run starts)."""
        sampling = self._sampling
        unset = sampling.unset
        if unset is not None:
            if unset():
                return False
            sampling.settle()
        if context.input_message is None and not context.resuming:
            return False  # a compaction pass
        decide = sampling.decide
        if decide is None:
            return True  # asked when the run's span starts
        metadata = context.metadata
        if metadata:
            try:
                parent, links = _parents(metadata)
            except TypeError:
                return True  # refused when the run starts: the request fails there
        else:
            parent = links = None
        decision = decide(self._run_name, parent, links, self._internal)
        if decision is None:
            return False
        self._decisions[context] = decision
        return True

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        """Phase moves open and close the run's and the model call's spans (where another
        listener hears the same move: else ``_on_move`` hears it, without an event)."""
        kind = type(event)
        if kind is PhaseTransitionEvent:
            self._on_move(context, event.current_phase)  # type: ignore[attr-defined]
        elif kind is RunCancelledEvent:
            self._cancelled(context)  # cancelled before any phase move was announced

    def _on_move(self, context: AgentRunContext, phase: AgentPhase) -> None:
        """A move into one of ``_phase_events``, heard where it happens
        (``zett_agent._hooks``): no event is built for it."""
        if phase is _GENERATING:
            self._start_chat(context)
        elif phase is _RUNNING_TOOL:
            self._start_tool(context)
        elif phase is _LOADING_CONTEXT:
            self._start_run(context)
        elif phase is _COMPLETED_PHASE:
            self._completed(context)
        elif phase is _CANCELLED_PHASE:
            self._cancelled(context)

    def _start_run(self, context: AgentRunContext) -> None:
        """Start the run's span.

        The sampler decides here, once per run, before anything is built (``RunSampler``):
        a run it drops withdraws this extension from the request's hooks, so it builds no
        attributes, span, child spans or contexts, and the runtime no further events for it.
        """
        decision = self._decisions.pop(context, None)
        if decision is not None:
            span = self._sampling.start_decided(decision)
        else:
            parent, links = _parents(context.metadata)
            span = self._sampling.begin(self._run_name, parent, links, self._internal)
        if span is None:
            context.withdraw(self)  # not sampled, or no SDK: nothing would be recorded
            return
        model = self._model_spans(context.model)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": context.session_id,
            "zett.request.id": context.request_id,
        }
        if self.agent_name is not None:
            attributes["gen_ai.agent.name"] = self.agent_name
        if self.agent_id is not None:
            attributes["gen_ai.agent.id"] = self.agent_id
        attributes.update(model.attributes)
        if context.resuming:
            attributes["zett.run.resumed"] = True
        if self.record_content and context.input_message is not None:
            attributes["gen_ai.input.messages"] = to_json([message_json(context.input_message)])
        span.set_attributes(attributes)
        run = _Run(context.session_id, span, model, self._api.context.detach)
        run.context = self._in_context(span)
        run.token = self._attach(run.context)
        self._runs[context] = run

    def _model_spans(self, model: object) -> ModelSpans:
        """What spans say of ``model``, kept for the last model seen."""
        known = self._model
        if known is not None and known[0] is model and known[1].describes(model):
            return known[1]
        spans = ModelSpans(model)
        self._model = (model, spans)
        return spans

    def _start_chat(self, context: AgentRunContext) -> None:
        run = self._runs.get(context)
        if run is None:
            return
        attributes = run.chat_attributes
        if attributes is None:  # the same for every model call of the request
            attributes = run.chat_attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.conversation.id": run.session_id,
                **run.model.attributes,
            }
        if self.record_content:
            attributes = {**attributes, **chat_input(context.state.messages)}
        span = self._sampling.tracer.start_span(
            run.model.chat_name, context=run.context, kind=self._client, attributes=attributes
        )
        run.chat = span
        run.chat_token = self._attach(self._in_context(span))

    def _completed(self, context: AgentRunContext) -> None:
        run = self._runs.pop(context, None)
        if run is None:
            return
        final: dict[str, Any] = {"zett.outcome": _COMPLETED}
        if self.record_content:
            last = context.state.messages[-1]
            final["gen_ai.output.messages"] = to_json([message_json(last)])
        run.end(final)

    def _cancelled(self, context: AgentRunContext) -> None:
        """Cancellation is no error: open spans end marked ``cancelled``."""
        self._decisions.pop(context, None)  # cancelled before the run's span started
        run = self._runs.pop(context, None)
        if run is None:
            return
        for tool in run.tools.values():
            tool.span.set_attribute("zett.outcome", _CANCELLED)
        if run.chat is not None:
            run.chat.set_attribute("zett.outcome", _CANCELLED)
        run.end({"zett.outcome": _CANCELLED})

    async def after_model(self, context: AgentRunContext, response: ModelResponse) -> None:
        run = self._runs.get(context)
        if run is None or run.chat is None:
            return
        message = response.message
        usage = response.usage
        attributes = usage_attributes(
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )
        attributes["zett.outcome"] = _COMPLETED
        if message.model:
            attributes["gen_ai.response.model"] = message.model
        if response.response_id:
            attributes["gen_ai.response.id"] = response.response_id
        reasons = finish_reasons(response)
        if reasons:
            attributes["gen_ai.response.finish_reasons"] = reasons
            run.finish_reasons = reasons
        if self.record_content:
            attributes["gen_ai.output.messages"] = to_json([output_json(message, reasons)])
        run.input_tokens += usage.input_tokens
        run.output_tokens += usage.output_tokens
        run.cache_read += usage.cache_read_tokens
        run.cache_write += usage.cache_write_tokens
        run.chat.set_attributes(attributes)  # one call: each one takes the span's lock
        if message.tool_calls:
            run.calls = {call.id: call for call in message.tool_calls}
        run.end_chat()

    def _start_tool(self, context: AgentRunContext) -> None:
        """RUNNING_TOOL: every ``before_tool`` has run; the call is the current one."""
        run = self._runs.get(context)
        if run is None:
            return
        call = _running_call(context, run)
        if call is None:
            return
        agent_tool = context.tools.get(call.name)
        # A name the model made up is content, not a bounded value: ``other`` without it.
        name = call.name if agent_tool is not None or self.record_content else UNKNOWN_TOOL
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": run.session_id,
        }
        if agent_tool is not None and agent_tool.description:
            attributes["gen_ai.tool.description"] = agent_tool.description
        if self.record_content:
            attributes["gen_ai.tool.call.arguments"] = to_json(call.arguments)
        span = self._sampling.tracer.start_span(
            f"execute_tool {name}", context=run.context, kind=self._internal, attributes=attributes
        )
        run.tools[call.id] = _ToolSpan(span, self._attach(self._in_context(span)), run.detach)

    async def after_tool(
        self,
        context: AgentRunContext,
        call: ToolCall,
        result: ToolResult,
        error: Exception | None,
    ) -> None:
        run = self._runs.get(context)
        if run is None:
            return
        tool = run.tools.pop(call.id, None)
        if tool is None:
            return
        span = tool.span
        if self.record_content:
            span.set_attribute("gen_ai.tool.call.result", content_json(result.content))
        outcome = tool_outcome(result, error)
        if outcome == _FAILED:
            _fail(span, error, self.record_content)
        else:
            span.set_attribute("zett.outcome", outcome)
        tool.end()

    async def on_error(self, context: AgentRunContext, error: Exception) -> None:
        self._decisions.pop(context, None)  # failed before the run's span started
        run = self._runs.pop(context, None)
        if run is None:
            return
        for tool in run.tools.values():
            _fail(tool.span, error, self.record_content)
        if run.chat is not None:
            _fail(run.chat, error, self.record_content)
        _fail(run.span, error, self.record_content)
        run.end()


class _ToolSpan:
    __slots__ = ("detach", "span", "token")

    def __init__(self, span: Span, token: object, detach: Callable[[object], None]) -> None:
        self.span = span
        self.token = token
        self.detach = detach

    def end(self) -> None:
        if self.token is not None:
            self.detach(self.token)
            self.token = None
        self.span.end()


class _Run:
    """One recorded request: its span, the open model and tool spans, its usage."""

    __slots__ = (
        "cache_read",
        "cache_write",
        "calls",
        "chat",
        "chat_attributes",
        "chat_token",
        "context",
        "detach",
        "finish_reasons",
        "input_tokens",
        "model",
        "output_tokens",
        "session_id",
        "span",
        "token",
        "tools",
    )

    def __init__(
        self, session_id: str, span: Span, model: ModelSpans, detach: Callable[[object], None]
    ) -> None:
        self.session_id = session_id
        self.detach = detach
        self.span = span
        #: One model for the whole request: what its spans say of it.
        self.model = model
        #: A model call span's attributes (content aside), built for the first one.
        self.chat_attributes: dict[str, Any] | None = None
        self.token: object = None
        #: The OpenTelemetry context holding the run's span: its children's parent.
        self.context: Context | None = None
        self.chat: Span | None = None
        self.chat_token: object = None
        self.tools: dict[str, _ToolSpan] = {}
        #: The latest model answer's tool calls by id (the one running is looked up here).
        self.calls: dict[str, ToolCall] = {}
        self.finish_reasons: list[str] | None = None
        self.input_tokens = self.output_tokens = self.cache_read = self.cache_write = 0

    def end_chat(self) -> None:
        chat, self.chat = self.chat, None
        if chat is None:
            return
        if self.chat_token is not None:
            self.detach(self.chat_token)
        self.chat_token = None
        chat.end()

    def end(self, final: dict[str, Any] | None = None) -> None:
        """End every open span, innermost first, then the run's with its usage (and
        ``final``'s attributes, set in the same call)."""
        if self.tools:
            for tool in reversed(list(self.tools.values())):
                tool.end()
            self.tools.clear()
        self.end_chat()
        span = self.span
        attributes = usage_attributes(
            self.input_tokens, self.output_tokens, self.cache_read, self.cache_write
        )
        if final:
            attributes.update(final)
        if self.finish_reasons:
            attributes["gen_ai.response.finish_reasons"] = self.finish_reasons
        span.set_attributes(attributes)
        if self.token is not None:
            self.detach(self.token)
        self.token = None
        span.end()


# -- attributes --------------------------------------------------------------------------


def _parents(metadata: Mapping[str, Any]) -> tuple[Context | None, list[Any] | None]:
    """The run span's parent context and links, from the request's metadata."""
    if not metadata:
        return None, None
    return parent_context(metadata.get(TRACE_PARENT)), span_links(metadata.get(TRACE_LINKS))


def _running_call(context: AgentRunContext, run: _Run) -> ToolCall | None:
    """The tool call being executed: from the latest answer, else (a resumed request's
    restored calls) from the history."""
    call_id = current_tool_call_id()
    if call_id is None:
        return None
    call = run.calls.get(call_id)
    if call is not None:
        return call
    for message in reversed(context.state.messages):
        if isinstance(message, AssistantMessage):
            for candidate in message.tool_calls:
                if candidate.id == call_id:
                    return candidate
    return None


def tool_outcome(result: ToolResult, error: Exception | None) -> str:
    """How a tool call ended: ``completed``, ``denied`` or ``expired`` (the person declined
    it or never answered: no error), else ``failed``. Spans and metrics both say it."""
    if result.success:
        return _COMPLETED
    return _declined(result.attributes, error) or _FAILED


def _declined(attributes: Mapping[str, Any], error: Exception | None) -> str | None:
    """``denied`` / ``expired`` when a tool result says the person declined or never
    answered (``{"reply": {"approved": False}}`` / ``{"reply": {"expired": True}}``, or
    the reply's deadline passed: ``ExternalEventExpired``)."""
    if isinstance(error, ExternalEventExpired):
        return "expired"
    reply = attributes.get("reply") if attributes else None
    if not isinstance(reply, Mapping):
        return None
    if reply.get("expired") is True:
        return "expired"
    if reply.get("approved") is False:
        return "denied"
    return None


def _fail(span: Span, error: BaseException | None, record_content: bool) -> None:
    """Mark ``span`` as failed: ``error.type``, ERROR status (with the text only with
    content recording: an error message may quote arguments)."""
    kind = type(error).__qualname__ if error is not None else "_OTHER"
    span.set_attributes({"error.type": kind, "zett.outcome": _FAILED})
    description = str(error) if record_content and error is not None else kind
    api = otel()
    span.set_status(api.Status(api.StatusCode.ERROR, description))
    if record_content and error is not None:
        span.record_exception(error)
