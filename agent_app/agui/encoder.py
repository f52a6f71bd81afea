"""zett's frames as AG-UI events: ``RunEncoder``.

A ``RunEncoder`` is fed the frames every socket of a chat receives (``run_started``,
``agent_event``, ``reply_accepted``, ``run_failed``, ``run_cancelled``, ``run_interrupted``,
``run_paused``, ``run_continued``; docs/protocol.md), in ``seq`` order, and answers each
with the AG-UI events it becomes (``SseEvent``: the event and its SSE ``id``). Frames for
one socket only (``pong``, ``external_event_result`` …) become nothing.

**Everything is derived from the frames**, never from the encoder's own counters, so the
same frames give the same events whoever encodes them, live or from the replay buffer, on
any worker: ``threadId`` is the chat, ``runId`` zett's request id, a message's
``messageId`` is ``<kind>:<request id>:<seq of the frame that opened it>``, a tool call's
``toolCallId`` is the model's call id. One event needs more than the frames, and has no id:
the ``MESSAGES_SNAPSHOT`` a new run's stream opens with, right after its ``RUN_STARTED``:
the chat's shown path as the caller read it before the run began, then the run's message
(``agent_app.agui.messages``).

**SSE ids.** The last event a frame becomes carries that frame's ``seq`` as its ``id``;
the others carry none. A frame becomes at most one event with an id, frames arrive in
``seq`` order, and a frame whose ``seq`` is not above the last one seen is dropped (the join
of a replay and the live frames): ids strictly increase. Every ``TEXT_MESSAGE_CONTENT``
(one per text delta frame) is the last event of its frame, so it has an id. An empty delta
becomes nothing.

**Runs and interrupts.** One zett run is one AG-UI run, unless it waits: a question or an
approval ends the AG-UI run (``RUN_FINISHED``, interrupt outcome). The answer's
``reply_accepted`` becomes nothing (a steer's, during a run, is ``CUSTOM``
``zett.reply_accepted``); the next event of the same zett run (the tool starting, or the wait's
deadline passing) begins another AG-UI run with the same ``runId``: the zett run goes on
where it waited. A continuation run (a paused run taken over after a restart) is a new zett
run: its ``RUN_STARTED`` names the paused one in ``parentRunId``. It asks again the waits
it runs with the answers it has: a wait answered already (its ``reply_accepted`` was seen,
or the caller names it in ``answered``) is only a ``CUSTOM`` event, no interrupt. A run
whose end never came (its process died unseen) is ended with ``RUN_ERROR``
``interrupted`` when the next run starts. A run continued on another worker after its
own died (``run_continued``) stays the same AG-UI run: the message that was streaming is
ended, ``CUSTOM`` ``zett.run_continued`` says so, and the events go on with the same
``runId``; approvals answered before are never asked again as interrupts.

**Re-attaching after ``seq`` N** (``after_seq=N``): the encoder is fed the run's frames
from its ``run_started`` — those numbered up to N to learn where the run stood, the rest to
be sent — and gives exactly the events of the frames after N, the same events a live
stream gave for them, with the same ids. Before the first of them come, without ids, the
events that re-open what was open at N: ``RUN_STARTED`` (the same ``runId``) and the
``REASONING_START``/``REASONING_MESSAGE_START``, ``TEXT_MESSAGE_START`` and
``TOOL_CALL_START`` of a reasoning, message or tool call begun at or before N and not
finished, with their original ids. Nothing streamed (no delta) is repeated, and no id: a
client that kept its state ignores a start it has seen; one that lost it has a valid
stream. A view that feeds from ``agent_app.bus.replay.ReplayBuffer`` takes the frames up to N
from ``frames_after(None)`` and the rest from ``frames_after(N)``: a merged delta frame
that straddles N then yields only the part after N.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_app.agui.errors import ErrorCode
from agent_app.agui.interrupts import interrupt_for, wait_of
from agent_app.agui.messages import json_text, result_text, snapshot_event
from agent_app.agui.sse import SseEvent

__all__ = ["CUSTOM_PREFIX", "RunEncoder", "refusal_events"]

#: Prefix of the CUSTOM names of zett's own events (``zett.tool_started`` …).
CUSTOM_PREFIX = "zett."
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "total_tokens",
)
#: zett's usage counts → AG-UI ``TokenUsage`` fields (camelCase wire names).
_TOKEN_USAGE = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "total_tokens": "totalTokens",
    "reasoning_tokens": "reasoningTokens",
    "cache_read_tokens": "cachedInputTokens",
    "cache_write_tokens": "cacheWriteInputTokens",
}
#: The replies that answer a wait (``reply_accepted.name``).
_ANSWERS = frozenset({"ask_user_response", "approval_response"})
_TOOL_RESULTS = frozenset({"tool_completed", "tool_failed", "tool_skipped"})
_MODEL_ENDS = frozenset({"model_completed", "model_stopped"})


@dataclass(slots=True)
class _ToolCall:
    id: str
    name: str
    parent: str | None


@dataclass(slots=True)
class _Segment:
    """What is open in the current AG-UI run, in the order it was opened."""

    reasoning: str | None = None
    text: str | None = None
    calls: dict[str, _ToolCall] = field(default_factory=dict)
    #: Usage of the model calls of this AG-UI run, by (provider, model).
    usage: dict[tuple[str | None, str | None], dict[str, int]] = field(default_factory=dict)

    def add_usage(self, message: dict[str, Any], usage: Any) -> None:
        """Count one model call's usage under its (provider, model)."""
        if not isinstance(usage, dict):
            return
        key = (message.get("provider"), message.get("model"))
        counts = self.usage.setdefault(key, dict.fromkeys(_USAGE_KEYS, 0))
        for name in _USAGE_KEYS:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                counts[name] += value

    def totals(self) -> dict[str, int]:
        """The usage of every model call of the AG-UI run, summed."""
        totals = dict.fromkeys(_USAGE_KEYS, 0)
        for counts in self.usage.values():
            for name in _USAGE_KEYS:
                totals[name] += counts[name]
        return totals

    def token_usage(self) -> list[dict[str, Any]]:
        """The usage by model, as ``RUN_FINISHED`` and ``RUN_ERROR`` carry it."""
        return [_token_usage(key, counts) for key, counts in self.usage.items()]


class RunEncoder:
    """Encodes the frames of a chat's runs, in order, as AG-UI events (see the module)."""

    def __init__(
        self,
        thread_id: str,
        *,
        after_seq: int | None = None,
        answered: Iterable[str] = (),
        snapshot: list[dict[str, Any]] | None = None,
    ) -> None:
        self.thread_id = thread_id
        #: History items of the chat before its new run: with the run's message, the
        #: ``MESSAGES_SNAPSHOT`` sent right after the run's ``RUN_STARTED``.
        self._snapshot = snapshot
        self.after_seq = after_seq
        #: Waits (tool call ids) known to be answered: asked again, they are no interrupt.
        self._answered = set(answered)
        #: The zett run the frames belong to, and the one it continues (if any).
        self.run_id: str | None = None
        self._parent_run_id: str | None = None
        #: The open AG-UI run, or None (none began yet, or it finished).
        self._segment: _Segment | None = None
        #: Whether the current AG-UI run is the zett run's first (it names the parent).
        self._first_segment = True
        #: Interrupts already announced for the current zett run (call ids).
        self._announced: set[str] = set()
        #: This model call: its streamed tool call ids by index, and the id of its text
        #: message (the tool calls' parent).
        self._turn_calls: dict[int, str] = {}
        self._turn_text: str | None = None
        self._last_seq: int | None = None
        self._reattached = after_seq is None
        #: The run whose ``RUN_STARTED`` went out before its frames (``begin``).
        self._begun: str | None = None
        #: The start of a ``*_CONTENT`` event's data, by message (``delta_text``).
        self._content_heads: dict[str, str] = {}

    # --- feeding -----------------------------------------------------------------------

    def encode(self, frame: dict[str, Any]) -> list[SseEvent]:
        """The AG-UI events of one frame (the last with the frame's ``seq`` as its id)."""
        seq = frame.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            return []  # a frame for one socket: nothing every client sees
        if self._last_seq is not None and seq <= self._last_seq:
            return []  # seen already (a replay overlapping the live frames)
        self._last_seq = seq
        sent = self.after_seq is None or seq > self.after_seq
        prelude = [] if self._reattached or not sent else self._reopen()
        if sent:
            self._reattached = True
        events = self._frame(frame, seq)
        if not sent:
            return []
        out = [SseEvent(data) for data in prelude]
        out += [SseEvent(data) for data in events[:-1]]
        if events:
            out.append(SseEvent(events[-1], seq))
        return out

    def delta_text(self, seq: int, request_id: str, kind: str, literal: str) -> str | None:
        """The SSE text of a ``text_delta`` or ``reasoning_delta`` frame (``kind``) whose
        delta is the JSON string ``literal``, when it becomes one ``*_CONTENT`` event of the
        message already open — most frames of a run; None for any other case, which
        ``encode`` then handles. The same text as ``encode`` gives, built without decoding
        or encoding the delta (the live stream's hot path)."""
        segment = self._segment
        if (
            segment is None
            or request_id != self.run_id
            or not self._reattached
            or (self._last_seq is not None and seq <= self._last_seq)
            or (self.after_seq is not None and seq <= self.after_seq)
            or literal == '""'
        ):
            return None
        message_id = segment.text if kind == "text_delta" else segment.reasoning
        if message_id is None:
            return None
        head = self._content_heads.get(message_id)
        if head is None:
            name = "TEXT_MESSAGE_CONTENT" if kind == "text_delta" else "REASONING_MESSAGE_CONTENT"
            empty = SseEvent(_event(name, messageId=message_id, delta="")).encode()
            head = self._content_heads[message_id] = empty[len("data: ") : -len('""}\n\n')]
        self._last_seq = seq
        return f"id: {seq}\ndata: {head}{literal}}}\n\n"

    def encode_all(self, frames: Iterable[dict[str, Any]]) -> list[SseEvent]:
        """The events of several frames, in order."""
        return [event for frame in frames for event in self.encode(frame)]

    # --- one frame ---------------------------------------------------------------------

    def _frame(self, frame: dict[str, Any], seq: int) -> list[dict[str, Any]]:
        kind = frame.get("type")
        request_id = frame.get("request_id")
        if kind == "run_started":
            return self._run_started(frame)
        if not isinstance(request_id, str):
            return []
        if self.run_id is None:
            self._begin_run(request_id, None)  # fed from the middle: adopt the run
        elif request_id != self.run_id:
            return []  # not this run's (a reply to a run that ended): nothing of this stream
        if kind == "agent_event":
            event = frame.get("event")
            return self._agent_event(event, seq) if isinstance(event, dict) else []
        if kind == "reply_accepted":
            payload = frame.get("payload")
            if frame.get("name") in _ANSWERS and isinstance(payload, dict):
                answered = payload.get("tool_call_id")
                if isinstance(answered, str):
                    self._answered.add(answered)
            if self._segment is None:
                # The answer to an interrupt: the run's next frame begins the next AG-UI
                # run (or, for a paused run, its continuation's ``run_started`` does).
                return []
            value = {key: frame[key] for key in frame if key not in ("type", "seq")}
            return [_custom("reply_accepted", value)]
        if kind == "run_failed":
            error = frame.get("error") or {}
            message = error.get("message") if isinstance(error, dict) else None
            code = (
                ErrorCode.BUDGET_EXCEEDED
                if frame.get("status") == ErrorCode.BUDGET_EXCEEDED
                else ErrorCode.RUN_FAILED
            )
            return self._error(code, message or "The run failed.")
        if kind == "run_interrupted":
            code = ErrorCode.EXPIRED if frame.get("status") == "expired" else ErrorCode.INTERRUPTED
            return self._error(code, frame.get("message") or "The run was interrupted.")
        if kind == "run_cancelled":
            return self._finish({"type": "cancelled"})
        if kind == "run_paused":
            return self._paused(frame.get("pending") or [])
        if kind == "run_continued":
            return self._continued(frame)
        return []

    def _continued(self, frame: dict[str, Any]) -> list[dict[str, Any]]:
        """The run goes on after its worker stopped (same ``runId``): what was streaming is
        ended (the model writes that step again), then ``CUSTOM`` ``zett.run_continued``."""
        out = self._open_segment()
        out += [*self._close_text(), *self._close_reasoning()]
        self._turn_calls, self._turn_text = {}, None
        value = {key: frame[key] for key in frame if key not in ("type", "seq")}
        return [*out, _custom("run_continued", value)]

    def begin(self, run_id: str, snapshot: list[dict[str, Any]] | None = None) -> SseEvent:
        """``RUN_STARTED`` of a run the stream's view has just started, sent before the
        run's frames come (the stream's first byte); its ``run_started`` frame then opens
        nothing more. ``snapshot``: the history of the ``MESSAGES_SNAPSHOT`` after it (or
        ``show``, later, before that frame)."""
        self._begin_run(run_id, None)
        self._reattached, self._begun, self._snapshot = True, run_id, snapshot
        return SseEvent(self._open_segment()[0])

    def show(self, snapshot: list[dict[str, Any]]) -> None:
        """The history of the ``MESSAGES_SNAPSHOT`` after the next ``RUN_STARTED``."""
        self._snapshot = snapshot

    def _run_started(self, frame: dict[str, Any]) -> list[dict[str, Any]]:
        request_id = frame.get("request_id")
        if not isinstance(request_id, str):
            return []
        value = {key: frame[key] for key in frame if key not in ("type", "seq")}
        unended: list[dict[str, Any]] = []
        if request_id == self._begun:  # its RUN_STARTED went out already (``begin``)
            self._begun, opened = None, []
        else:
            if self._segment is not None:
                # The previous run's end never came (its process died unseen): end it here.
                unended = self._error(ErrorCode.INTERRUPTED, "The run was interrupted.")
            resumed_from = frame.get("resumed_from")
            self._begin_run(request_id, resumed_from if isinstance(resumed_from, str) else None)
            opened = self._open_segment()
        if self._snapshot is not None:
            opened.append(snapshot_event(self._snapshot, frame))
            self._snapshot = None
        return [*unended, *opened, _custom("run_started", value)]

    def _begin_run(self, request_id: str, parent: str | None) -> None:
        self.run_id, self._parent_run_id = request_id, parent
        self._segment, self._first_segment = None, True
        self._announced = set()
        self._turn_calls, self._turn_text = {}, None

    # --- agent events ------------------------------------------------------------------

    def _agent_event(self, event: dict[str, Any], seq: int) -> list[dict[str, Any]]:
        kind = event.get("type")
        out = self._open_segment()
        segment = self._segment
        assert segment is not None
        if "parent_tool_call_id" in event:
            # A sub-run's event: ``CUSTOM`` ``zett.<type>`` (its ``agent`` and
            # ``parent_tool_call_id`` in the value), inside the open ``ask_<id>`` call; its
            # questions and approvals are interrupts like the run's own.
            if kind == "custom":
                return [*out, *self._custom_event(event)]
            return [*out, _custom(str(kind), event)]
        if kind == "text_delta" or kind == "reasoning_delta":
            delta = event.get("delta")
            if not isinstance(delta, str) or not delta:
                return out
            if kind == "text_delta":
                if segment.text is None:
                    out += self._open_text(seq)
                return [*out, _event("TEXT_MESSAGE_CONTENT", messageId=segment.text, delta=delta)]
            if segment.reasoning is None:
                out += self._open_reasoning(seq)
            return [
                *out,
                _event("REASONING_MESSAGE_CONTENT", messageId=segment.reasoning, delta=delta),
            ]
        if kind == "content_started":
            return [*out, *self._close_text(), *self._open_text(seq)]
        if kind == "content_completed":
            return [*out, *self._close_text()]
        if kind == "reasoning_started":
            return [*out, *self._close_reasoning(), *self._open_reasoning(seq)]
        if kind == "reasoning_completed":
            return [*out, *self._close_reasoning()]
        if kind == "tool_call_delta":
            return [*out, *self._tool_call_delta(event.get("tool_call_delta"))]
        if kind == "model_started":
            self._turn_calls, self._turn_text = {}, None
        elif kind in _MODEL_ENDS:
            out += self._model_end(event)
        elif kind in _TOOL_RESULTS:
            return [*out, *_tool_results(event, self.run_id, seq)]
        elif kind == "run_completed":
            assert self._segment is not None
            usage = self._segment.totals()
            return [*out, *self._finish({"type": "success"}, result={"usage": usage})]
        elif kind == "custom":
            return [*out, *self._custom_event(event)]
        return [*out, _custom(str(kind), event)]

    def _open_text(self, seq: int) -> list[dict[str, Any]]:
        assert self._segment is not None
        self._segment.text = self._turn_text = f"text:{self.run_id}:{seq}"
        return [_event("TEXT_MESSAGE_START", messageId=self._segment.text, role="assistant")]

    def _close_text(self) -> list[dict[str, Any]]:
        assert self._segment is not None
        message_id, self._segment.text = self._segment.text, None
        return [] if message_id is None else [_event("TEXT_MESSAGE_END", messageId=message_id)]

    def _open_reasoning(self, seq: int) -> list[dict[str, Any]]:
        assert self._segment is not None
        message_id = self._segment.reasoning = f"reasoning:{self.run_id}:{seq}"
        return _reasoning_starts(message_id)

    def _close_reasoning(self) -> list[dict[str, Any]]:
        assert self._segment is not None
        message_id, self._segment.reasoning = self._segment.reasoning, None
        if message_id is None:
            return []
        return [
            _event("REASONING_MESSAGE_END", messageId=message_id),
            _event("REASONING_END", messageId=message_id),
        ]

    def _tool_call_delta(self, delta: Any) -> list[dict[str, Any]]:
        assert self._segment is not None
        if not isinstance(delta, dict) or not isinstance(delta.get("index"), int):
            return []
        index, fragment = delta["index"], delta.get("arguments_delta") or ""
        out: list[dict[str, Any]] = []
        call_id = self._turn_calls.get(index)
        if call_id is None:
            call_id, name = delta.get("id"), delta.get("name")
            if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
                return []  # a call streamed without its id: started when the model ends
            self._turn_calls[index] = call_id
            call = _ToolCall(call_id, name, self._turn_text)
            self._segment.calls[call_id] = call
            out.append(_tool_call_start(call))
        if isinstance(fragment, str) and fragment and call_id in self._segment.calls:
            out.append(_event("TOOL_CALL_ARGS", toolCallId=call_id, delta=fragment))
        return out

    def _model_end(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """A model call ended: its tool calls are complete (started here if never streamed)."""
        segment = self._segment
        assert segment is not None
        out = [*self._close_reasoning(), *self._close_text()]
        response = event.get("response") if isinstance(event.get("response"), dict) else {}
        message = response.get("message") if isinstance(response.get("message"), dict) else {}
        streamed = set(self._turn_calls.values())
        for call in message.get("tool_calls") or ():
            call_id, name = call.get("id"), call.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str) or call_id in streamed:
                continue
            started = _ToolCall(call_id, name, self._turn_text)
            segment.calls[call_id] = started
            out.append(_tool_call_start(started))
            out.append(
                _event("TOOL_CALL_ARGS", toolCallId=call_id, delta=json_text(call.get("arguments")))
            )
        for call_id in list(segment.calls):
            del segment.calls[call_id]
            out.append(_event("TOOL_CALL_END", toolCallId=call_id))
        segment.add_usage(message, response.get("usage"))
        self._turn_calls = {}
        return out

    def _custom_event(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        name, payload = event.get("name"), event.get("payload")
        if not isinstance(name, str):
            return [_custom("custom", event)]  # a frame too large kept only the event's type
        out = [_event("CUSTOM", name=name, value=payload)]
        interrupt = interrupt_for(name, payload) if wait_of(name, payload) else None
        if interrupt is None or interrupt["id"] in self._answered:
            return out  # no wait, or one answered already (a continuation asks it again)
        self._announced.add(interrupt["id"])
        return [*out, *self._finish({"type": "interrupt", "interrupts": [interrupt]})]

    # --- how an AG-UI run begins and ends ----------------------------------------------

    def _open_segment(self) -> list[dict[str, Any]]:
        if self._segment is not None:
            return []
        self._segment = _Segment()
        return [self._run_started_event()]

    def _run_started_event(self) -> dict[str, Any]:
        started = _event("RUN_STARTED", threadId=self.thread_id, runId=self.run_id)
        if self._first_segment and self._parent_run_id is not None:
            started["parentRunId"] = self._parent_run_id
        return started

    def _reopen(self) -> list[dict[str, Any]]:
        """The starts of what is open: sent, without ids, before a re-attached stream."""
        segment = self._segment
        if segment is None:
            return []
        out = [self._run_started_event()]
        if segment.reasoning is not None:
            out += _reasoning_starts(segment.reasoning)
        if segment.text is not None:
            out.append(_event("TEXT_MESSAGE_START", messageId=segment.text, role="assistant"))
        out += [_tool_call_start(call) for call in segment.calls.values()]
        return out

    def _finish(
        self, outcome: dict[str, Any], *, result: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Close what is open and end the AG-UI run with ``RUN_FINISHED``."""
        out = self._open_segment()
        segment = self._segment
        assert segment is not None
        out += [*self._close_reasoning(), *self._close_text()]
        out += [_event("TOOL_CALL_END", toolCallId=call_id) for call_id in segment.calls]
        finished = _event("RUN_FINISHED", threadId=self.thread_id, runId=self.run_id)
        if result is not None:
            finished["result"] = result
        finished["outcome"] = outcome
        usage = segment.token_usage()
        if usage:
            finished["usage"] = usage
        self._end_segment()
        return [*out, finished]

    def _error(self, code: ErrorCode, message: str) -> list[dict[str, Any]]:
        out = self._open_segment()
        assert self._segment is not None
        failed = _event("RUN_ERROR", message=message, code=code.value)
        usage = self._segment.token_usage()
        if usage:
            failed["usage"] = usage
        self._end_segment()
        return [*out, failed]

    def _end_segment(self) -> None:
        self._segment, self._first_segment = None, False

    def _paused(self, pending: list[Any]) -> list[dict[str, Any]]:
        """The run's process died while it waited: its open waits are the interrupts."""
        interrupts = []
        for item in pending:
            if not isinstance(item, dict) or item.get("request_id") not in (None, self.run_id):
                continue
            interrupt = interrupt_for(item.get("name"), item.get("payload"), item.get("expires_at"))
            if interrupt is not None:
                interrupts.append(interrupt)
        fresh = [item for item in interrupts if item["id"] not in self._announced]
        if not interrupts or (self._segment is None and not fresh):
            return []  # the client was told about every one of them already
        self._announced.update(item["id"] for item in interrupts)
        return self._finish({"type": "interrupt", "interrupts": interrupts})


def refusal_events(thread_id: str, run_id: str, code: ErrorCode, message: str) -> list[SseEvent]:
    """A stream that only says a request was refused after all (a resume of an interrupt
    answered meanwhile): ``RUN_STARTED`` and ``RUN_ERROR``, without ids (no frame)."""
    return [
        SseEvent(_event("RUN_STARTED", threadId=thread_id, runId=run_id)),
        SseEvent(_event("RUN_ERROR", message=message, code=code.value)),
    ]


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def _custom(kind: str, value: dict[str, Any]) -> dict[str, Any]:
    return _event("CUSTOM", name=CUSTOM_PREFIX + kind, value=value)


def _tool_results(event: dict[str, Any], run_id: str | None, seq: int) -> list[dict[str, Any]]:
    """``TOOL_CALL_RESULT`` of each call a tool event closes (else the event as ``CUSTOM``)."""
    message = event.get("message") if isinstance(event.get("message"), dict) else {}
    out = []
    for call in event.get("tool_calls") or ():
        call_id = call.get("id") or message.get("tool_call_id")
        if not isinstance(call_id, str):
            continue
        message_id = f"tool:{run_id}:{seq}" + (f".{len(out)}" if out else "")
        zett = {"event": event.get("type"), "success": bool(message.get("success", False))}
        reply = (message.get("attributes") or {}).get("reply")
        if reply is not None:
            zett["reply"] = reply
        out.append(
            _event(
                "TOOL_CALL_RESULT",
                messageId=message_id,
                toolCallId=call_id,
                content=result_text(message.get("content")),
                role="tool",
                metadata={"zett": zett},
            )
        )
    return out or [_custom(str(event.get("type")), event)]


def _reasoning_starts(message_id: str) -> list[dict[str, Any]]:
    return [
        _event("REASONING_START", messageId=message_id),
        _event("REASONING_MESSAGE_START", messageId=message_id, role="reasoning"),
    ]


def _tool_call_start(call: _ToolCall) -> dict[str, Any]:
    start = _event("TOOL_CALL_START", toolCallId=call.id, toolCallName=call.name)
    if call.parent is not None:
        start["parentMessageId"] = call.parent
    return start


def _token_usage(key: tuple[str | None, str | None], counts: dict[str, int]) -> dict[str, Any]:
    provider, model = key
    usage: dict[str, Any] = {}
    if provider is not None:
        usage["provider"] = provider
    if model is not None:
        usage["model"] = model
    for name, wire in _TOKEN_USAGE.items():
        if counts[name] or name in ("input_tokens", "output_tokens", "total_tokens"):
            usage[wire] = counts[name]
    return usage
