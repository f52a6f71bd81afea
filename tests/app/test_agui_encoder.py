"""zett's frames as AG-UI events (agent_app.agui.encoder), on frames of real runs.

Each scenario runs a real request through the chat socket (the ASGI app, the consumer, the
agent, a scripted model) and records the frames every socket receives; the encoder is fed
those. Every event must parse with ``ag-ui-protocol``'s own models (no field outside them),
every stream must pass ``ag-ui-validate`` (its SSE framing too), and a stream re-attached
after any ``seq`` must give exactly the events the live stream gave after it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from ag_ui.core import Event, RunFinishedEvent
from ag_ui_validate.transport import TransportOptions, validate_body
from pydantic import BaseModel, TypeAdapter

from agent_app.agui.encoder import RunEncoder
from agent_app.agui.interrupts import replies_for
from agent_app.agui.run_input import parse_run_input
from agent_app.agui.sse import CONTENT_TYPE, KEEP_ALIVE, SseEvent, encode_events
from agent_app.bus.replay import ReplayBuffer
from agent_app.protocol.text import encode_frame
from tests.app.llm_doubles import GatedModel, call_tool, say
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.model import ModelEvent, ModelResponse, ModelUsage, ToolCallDelta
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)

EVENT = TypeAdapter(Event)


@dataclass
class Recording:
    """The broadcast frames of a chat (those with a ``seq``), in order."""

    thread_id: str
    frames: list[dict[str, Any]] = field(default_factory=list)

    def add(self, frames: list[dict[str, Any]]) -> None:
        self.frames += [frame for frame in frames if isinstance(frame.get("seq"), int)]

    def live(self) -> list[SseEvent]:
        return RunEncoder(self.thread_id).encode_all(self.frames)

    def by_frame(self) -> list[tuple[int, list[SseEvent]]]:
        """``(seq, events)`` of each frame, fed live."""
        encoder = RunEncoder(self.thread_id)
        return [(frame["seq"], encoder.encode(frame)) for frame in self.frames]


# --- recording real runs ------------------------------------------------------------------


async def record_answer(sockets, use_model) -> Recording:
    """Reasoning, then an answer."""
    use_model(
        ScriptedModel(
            [AssistantMessage("Paris is the capital.", reasoning="The user asks about France.")]
        )
    )
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "Capital of France?"})
    recording.add(await socket.run_to_completion())
    return recording


def _fragments(call_id: str, name: str, arguments: str, size: int) -> list[ModelEvent]:
    pieces = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    first = ModelEvent.tool_call(ToolCallDelta(0, call_id, name, pieces[0]))
    return [first] + [ModelEvent.tool_call(ToolCallDelta(0, None, None, p)) for p in pieces[1:]]


async def record_tool_call(sockets, use_model) -> Recording:
    """Text, a tool call streamed in fragments, its result, then the answer; usage counted."""
    arguments = json.dumps({"expression": "2 + 2"})
    call = ToolCall("calc-1", "calculate", {"expression": "2 + 2"})
    usage = ModelUsage(input_tokens=12, output_tokens=7, reasoning_tokens=2)
    turn = [
        ModelEvent.text("Let me "),
        ModelEvent.text("compute."),
        *_fragments("calc-1", "calculate", arguments, 6),
        ModelEvent.completed(
            ModelResponse(
                AssistantMessage("Let me compute.", tool_calls=(call,), model="m-1"), usage=usage
            )
        ),
    ]
    use_model(ScriptedModel([turn, say("It is 4.")], usage=ModelUsage(3, 2)))
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "What is 2 + 2?"})
    recording.add(await socket.run_to_completion())
    return recording


async def _answer_over_agui(socket, recording: Recording, kinds: dict[str, str], payload) -> None:
    """Answer the interrupt that ended the stream the way an AG-UI client does: a resume."""
    finished = recording.live()[-1].data
    assert finished["type"] == "RUN_FINISHED"
    (interrupt,) = finished["outcome"]["interrupts"]
    body = {
        "threadId": recording.thread_id,
        "runId": "client-run-2",
        "messages": [],
        "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}],
    }
    request = parse_run_input(json.dumps(body))
    (reply,) = replies_for(request.resume, kinds)
    await socket.send({"type": "external_event", "name": reply.name, "payload": reply.payload})
    verdict = await socket.expect("external_event_result")
    assert verdict["accepted_by"], verdict


async def record_question(sockets, use_model) -> Recording:
    """``ask_user``: the stream ends in an interrupt; the resume's reply continues the run."""
    use_model(
        ScriptedModel(
            [
                call_tool("ask_user", "ask-1", question="Which city?", options=["Paris", "Rome"]),
                lambda request: say(f"You chose {request.messages[-1].content}."),
            ]
        )
    )
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "Plan a trip"})
    recording.add(await socket.until_event("custom", "ask_user"))
    await _answer_over_agui(socket, recording, {"ask-1": "ask_user"}, {"answer": "Rome"})
    frames = await socket.run_to_completion()
    assert frames[-1]["event"]["message"]["content"] == "You chose Rome."
    recording.add(frames)
    return recording


async def record_approval(sockets, use_model) -> Recording:
    """An approval: interrupt, then ``{"approved": true}`` runs the tool."""
    use_model(ScriptedModel([call_tool("save_note", "note-1", title="T", text="x"), say("Saved.")]))
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "Note this"})
    recording.add(await socket.until_event("custom", "approval_requested"))
    await _answer_over_agui(socket, recording, {"note-1": "approval"}, {"approved": True})
    frames = await socket.run_to_completion()
    recording.add(frames)
    assert frames[-1]["event"]["message"]["content"] == "Saved."
    return recording


def _fail(request):
    raise RuntimeError("the provider is down")


async def record_failure(sockets, use_model) -> Recording:
    use_model(ScriptedModel([_fail]))
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "Hello"})
    recording.add(await socket.until_event("run_failed"))
    return recording


async def record_cancel(sockets, use_model) -> Recording:
    """Cancelled mid-answer: the open message is closed before the run ends."""
    gate = asyncio.Event()
    model = use_model(GatedModel([ModelEvent.text("Half an "), gate]))
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "Tell me a story"})
    recording.add(await socket.until_event("text_delta"))
    await socket.send({"type": "cancel"})
    recording.add(await socket.until_event("run_cancelled"))
    assert model.closed.is_set()
    return recording


async def record_large(sockets, use_model) -> Recording:
    """Deltas and arguments too large for one frame: split into several frames, and the
    events that repeat them shortened (docs/protocol.md, "Frame sizes")."""
    huge = "1" + "+1" * 300_000
    use_model(ScriptedModel([call_tool("calculate", "big-1", expression=huge), say("é" * 400_000)]))
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "Add them up"})
    recording.add(await socket.run_to_completion())
    return recording


async def record_steer(sockets, use_model) -> Recording:
    """A steer while the model answers: its tool call is skipped, the next turn answers."""
    gate = asyncio.Event()
    call = ToolCall("calc-9", "calculate", {"expression": "1 + 1"})
    turn = [
        ModelEvent.text("Computing"),
        *_fragments("calc-9", "calculate", json.dumps(call.arguments), 8),
        gate,
        ModelEvent.completed(ModelResponse(AssistantMessage("Computing", tool_calls=(call,)))),
    ]
    use_model(GatedModel(turn, [completed_text("Fine, no maths.")]))
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "1 + 1?"})
    recording.add(await socket.until_event("tool_call_delta"))
    await socket.send({"type": "steer", "content": "Never mind the maths."})
    recording.add(await socket.until(lambda f: f["type"] == "external_event_result"))
    gate.set()
    frames = await socket.run_to_completion()
    recording.add(frames)
    assert "tool_skipped" in [e["event"]["type"] for e in frames if e["type"] == "agent_event"]
    return recording


SCENARIOS = {
    "large": record_large,
    "steer": record_steer,
    "answer": record_answer,
    "tool_call": record_tool_call,
    "question": record_question,
    "approval": record_approval,
    "failure": record_failure,
    "cancel": record_cancel,
}


@pytest.fixture(params=sorted(SCENARIOS))
async def recording(request, sockets, use_model) -> Recording:
    return await SCENARIOS[request.param](sockets, use_model)


# --- checking streams ----------------------------------------------------------------------


def parse(event: SseEvent) -> BaseModel:
    """The event as ``ag-ui-protocol`` reads it; no field of ours is outside its models."""
    model = EVENT.validate_python(event.data)
    assert not model.model_extra, f"fields outside the AG-UI model: {model.model_extra}"
    for value in model.__dict__.values():
        for nested in value if isinstance(value, list) else [value]:
            if isinstance(nested, BaseModel):
                assert not nested.model_extra, f"fields outside the AG-UI model: {nested}"
    assert model.model_dump(mode="json", by_alias=True) == event.data
    return model


async def _chunks(text: str) -> AsyncIterator[bytes]:
    for line in text.splitlines(keepends=True):
        yield line.encode("utf-8")


async def validate(events: list[SseEvent], *, live: list[SseEvent] | None = None) -> None:
    """The events, as SSE with keep-alive lines between, pass ag-ui-validate.

    Two findings are expected and allowed, each only where it is. A ``TOOL_CALL_RESULT`` of
    a call started before the AG-UI run it is in (AGUI207: the validator knows no earlier
    run): the run before an interrupt started the call, or the stream was re-attached after
    the call's start; ``live`` (the whole live stream) says which calls were started at all.
    And on a stream re-attached while a call's arguments streamed, that call's arguments are
    only the part after the re-attachment (AGUI204).
    """
    text = KEEP_ALIVE + "".join(event.encode() + KEEP_ALIVE for event in events)
    result = await validate_body(_chunks(text), CONTENT_TYPE, TransportOptions(recorded=True))
    assert result.event_count == len(events)
    started = {e.data["toolCallId"] for e in live or events if e.type == "TOOL_CALL_START"}
    reopened = {
        event.data["toolCallId"]
        for event in events
        if event.type == "TOOL_CALL_START" and event.id is None and _in_prelude(events, event)
    }
    problems = []
    for d in result.report.diagnostics:
        if d.severity not in ("error", "warning"):
            continue
        about = events[d.event_index].data if d.event_index >= 0 else {}
        if d.rule == "AGUI207" and about.get("toolCallId") in started:
            continue
        if d.rule == "AGUI204" and about.get("toolCallId") in reopened:
            continue
        problems.append(f"{d.rule} {d.severity} @{d.event_index} {about}: {d.message}")
    assert not problems, "\n".join(problems)


def _in_prelude(events: list[SseEvent], event: SseEvent) -> bool:
    """Whether ``event`` comes before the first event with an id (a re-attached stream's)."""
    for other in events:
        if other is event:
            return True
        if other.id is not None:
            return False
    return False


def interrupted_calls(events: list[SseEvent]) -> set[str]:
    return {
        interrupt["toolCallId"]
        for event in events
        if event.type == "RUN_FINISHED" and event.data["outcome"]["type"] == "interrupt"
        for interrupt in event.data["outcome"]["interrupts"]
    }


_STARTS = frozenset(
    {
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "TEXT_MESSAGE_START",
        "TOOL_CALL_START",
    }
)


# --- every stream ---------------------------------------------------------------------------


async def test_every_event_parses_with_the_ag_ui_models(recording):
    events = recording.live()
    assert events
    for event in events:
        parse(event)


async def test_recorded_streams_pass_ag_ui_validate(recording):
    await validate(recording.live())


async def test_the_last_event_of_each_frame_carries_its_seq(recording):
    seen: list[int] = []
    frames = {frame["seq"]: frame for frame in recording.frames}
    for seq, events in recording.by_frame():
        if not events:  # only the reply to an interrupt: the run's next frame starts anew
            assert frames[seq]["type"] == "reply_accepted", frames[seq]
            continue
        assert events[-1].id == seq
        assert all(event.id is None for event in events[:-1])
        seen.append(seq)
    assert seen == sorted(set(seen))  # strictly increasing
    for event in recording.live():
        if event.type == "TEXT_MESSAGE_CONTENT":
            assert event.id is not None


async def test_ids_come_from_the_frames_alone(recording):
    first, second = recording.live(), recording.live()
    assert first == second  # two encoders, the same events
    started = [frame for frame in recording.frames if frame["type"] == "run_started"]
    run_ids = {event.data["runId"] for event in first if "runId" in event.data}
    assert run_ids == {frame["request_id"] for frame in started}
    assert {event.data["threadId"] for event in first if "threadId" in event.data} == {
        recording.thread_id
    }
    calls = {
        delta["id"]
        for frame in recording.frames
        if frame["type"] == "agent_event" and frame["event"]["type"] == "tool_call_delta"
        if (delta := frame["event"]["tool_call_delta"])["id"]
    }
    starts = {event.data["toolCallId"] for event in first if event.type == "TOOL_CALL_START"}
    assert starts == calls


async def test_reattaching_after_any_seq_gives_exactly_the_rest_of_the_stream(recording):
    by_frame = recording.by_frame()
    for after in [0, *(seq for seq, _ in by_frame)]:
        expected = [event for seq, events in by_frame if seq > after for event in events]
        before = [event.data for seq, events in by_frame if seq <= after for event in events]
        got = RunEncoder(recording.thread_id, after_seq=after).encode_all(recording.frames)
        if not expected:
            assert got == [], after
            continue
        prelude, rest = got[: len(got) - len(expected)], got[len(got) - len(expected) :]
        assert rest == expected, after
        for event in prelude:  # only starts of what is open, already sent, without ids
            assert event.id is None and event.type in _STARTS, (after, event)
            assert event.data in before, (after, event)
        await validate(got, live=recording.live())


async def test_a_replay_buffer_that_merged_deltas_gives_the_rest_of_the_text(recording):
    buffer = ReplayBuffer(limit=2)  # merges the deltas on every append
    for frame in recording.frames:
        event_type = frame.get("event", {}).get("type")
        mergeable = event_type in ("text_delta", "reasoning_delta")
        buffer.append(frame["seq"], encode_frame(frame), mergeable=mergeable)
    live = recording.live()
    full = _texts(live)
    for after in [0, *(frame["seq"] for frame in recording.frames)]:
        upto = [json.loads(text) for text in buffer.frames_after(None)]
        frames = [frame for frame in upto if frame["seq"] <= after]
        frames += [json.loads(text) for text in buffer.frames_after(after)]
        got = RunEncoder(recording.thread_id, after_seq=after).encode_all(frames)
        seen = _texts([event for event in live if event.id is not None and event.id <= after])
        rest = _texts(got)
        for message_id, text in full.items():
            assert seen.get(message_id, "") + rest.get(message_id, "") == text, after
        ids = [event.id for event in got if event.id is not None]
        assert ids == sorted(set(ids)) and all(i > after for i in ids)
        if got:
            await validate(got, live=live)


def _texts(events: list[SseEvent]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for event in events:
        if event.type in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            message_id = event.data["messageId"]
            texts[message_id] = texts.get(message_id, "") + event.data["delta"]
    return texts


async def test_frames_seen_already_are_dropped(recording):
    encoder = RunEncoder(recording.thread_id)
    first = encoder.encode_all(recording.frames)
    assert encoder.encode_all(recording.frames) == []  # a replay overlapping the live frames
    assert first == recording.live()


# --- what each kind of run becomes ----------------------------------------------------------


def event_names(events: list[SseEvent]) -> list[str]:
    return [event.type if event.type != "CUSTOM" else event.data["name"] for event in events]


async def test_split_frames_become_one_event_each_that_concatenate(sockets, use_model):
    recording = await record_large(sockets, use_model)
    events = recording.live()
    pieces = [e for e in events if e.type == "TEXT_MESSAGE_CONTENT"]
    assert len(pieces) > 1 and all(piece.id is not None for piece in pieces)
    assert "".join(piece.data["delta"] for piece in pieces) == "é" * 400_000
    args = [e for e in events if e.type == "TOOL_CALL_ARGS"]
    assert len(args) > 1
    arguments = json.loads("".join(e.data["delta"] for e in args))
    assert arguments["expression"] == "1" + "+1" * 300_000
    result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
    assert result.data["metadata"]["zett"] == {"event": "tool_failed", "success": False}


async def test_a_steer_skips_the_tool_call_with_a_result_and_zett_events(sockets, use_model):
    recording = await record_steer(sockets, use_model)
    types = event_names(recording.live())
    result = next(e for e in recording.live() if e.type == "TOOL_CALL_RESULT")
    assert result.data["toolCallId"] == "calc-9"
    assert result.data["metadata"]["zett"] == {"event": "tool_skipped", "success": False}
    assert "zett.steering_started" in types and "zett.reply_accepted" in types
    assert types[-1] == "RUN_FINISHED"


async def test_an_answer_with_reasoning(sockets, use_model):
    recording = await record_answer(sockets, use_model)
    events = recording.live()
    assert event_names(events) == [
        "RUN_STARTED",
        "zett.run_started",
        "zett.model_started",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        *["REASONING_MESSAGE_CONTENT"] * 5,
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        *["TEXT_MESSAGE_CONTENT"] * 4,
        "TEXT_MESSAGE_END",
        "zett.model_completed",
        "RUN_FINISHED",
    ]
    texts = list(_texts(events).values())
    assert texts == ["The user asks about France.", "Paris is the capital."]
    request_id = recording.frames[0]["request_id"]
    start = next(event for event in events if event.type == "TEXT_MESSAGE_START")
    assert start.data == {
        "type": "TEXT_MESSAGE_START",
        "messageId": f"text:{request_id}:{start.id}",
        "role": "assistant",
    }
    finished = parse(events[-1])
    assert isinstance(finished, RunFinishedEvent)
    assert events[-1].data["outcome"] == {"type": "success"}
    assert events[-1].data["result"]["usage"]["total_tokens"] == 0


async def test_a_tool_call_streams_its_arguments_and_result_and_usage_is_reported(
    sockets, use_model
):
    recording = await record_tool_call(sockets, use_model)
    events = recording.live()
    text_id = next(e.data["messageId"] for e in events if e.type == "TEXT_MESSAGE_START")
    start = next(e for e in events if e.type == "TOOL_CALL_START")
    assert start.data == {
        "type": "TOOL_CALL_START",
        "toolCallId": "calc-1",
        "toolCallName": "calculate",
        "parentMessageId": text_id,
    }
    args = "".join(e.data["delta"] for e in events if e.type == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"expression": "2 + 2"}
    assert len([e for e in events if e.type == "TOOL_CALL_ARGS"]) > 1
    types = event_names(events)
    assert types.index("TOOL_CALL_END") < types.index("TOOL_CALL_RESULT")
    result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
    assert result.data["toolCallId"] == "calc-1"
    assert result.data["content"] == "4"
    assert result.data["metadata"] == {"zett": {"event": "tool_completed", "success": True}}
    finished = events[-1].data
    assert finished["usage"] == [
        {"model": "m-1", "inputTokens": 12, "outputTokens": 7, "totalTokens": 19,
         "reasoningTokens": 2},
        {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
    ]  # fmt: skip
    usage = finished["result"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (15, 9, 24)


async def test_a_failed_run_ends_in_run_error_with_a_code(sockets, use_model):
    recording = await record_failure(sockets, use_model)
    failed = recording.frames[-1]
    events = recording.live()
    assert events[-1].id == failed["seq"]
    assert events[-1].data == {
        "type": "RUN_ERROR",
        "message": failed["error"]["message"],
        "code": "run_failed",
    }


async def test_a_cancelled_run_closes_its_message_and_finishes_cancelled(sockets, use_model):
    recording = await record_cancel(sockets, use_model)
    events = recording.live()
    assert event_names(events[-2:]) == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert events[-1].data["outcome"] == {"type": "cancelled"}
    assert events[-1].id == recording.frames[-1]["seq"]


# --- SSE framing ----------------------------------------------------------------------------


def test_sse_framing():
    event = SseEvent({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a\nb"}, 7)
    text = event.encode()
    assert text.startswith("id: 7\ndata: {")
    assert text.endswith("}\n\n") and text.count("\n") == 3  # one data line
    assert json.loads(text.split("data: ", 1)[1]) == event.data
    assert SseEvent({"type": "RUN_STARTED"}).encode().startswith("data: ")
    assert encode_events([event, event]) == text * 2
    assert KEEP_ALIVE.startswith(":") and KEEP_ALIVE.endswith("\n\n")
    assert CONTENT_TYPE == "text/event-stream"
    lone = SseEvent({"type": "CUSTOM", "name": "x", "value": "\ud800"}, 1).encode()
    assert lone.encode("utf-8")  # a lone surrogate leaves escaped, never unencodable


async def test_frames_replayed_to_a_socket_that_joins_late_give_the_live_events(sockets, use_model):
    """The app's own replay (a socket with ``?after_seq``) feeds the encoder the same frames:
    a stream re-attached from it equals the live stream's rest."""
    gate = asyncio.Event()
    reasoning = [ModelEvent.reasoning("Think "), ModelEvent.reasoning("first.")]
    text = [ModelEvent.text("Half "), ModelEvent.text("an "), ModelEvent.text("answer")]
    use_model(GatedModel([*reasoning, *text, gate, completed_text("Half an answer")]))
    watching = await sockets()
    recording = Recording(watching.session_id)
    await watching.send({"type": "user_message", "content": "Go"})
    frames = await watching.until(lambda f: (f.get("event") or {}).get("delta") == "answer")
    recording.add(frames)
    joined = await sockets(watching.session_id, after_seq=0)
    replayed = await joined.until(lambda f: f.get("seq") == recording.frames[-1]["seq"])
    assert [f for f in replayed if "seq" in f] == recording.frames
    middle = next(
        f["seq"] for f in recording.frames if (f.get("event") or {}).get("delta") == "an "
    )
    late = await sockets(watching.session_id, after_seq=middle)
    rest = await late.until(lambda f: f.get("seq") == recording.frames[-1]["seq"])
    gate.set()
    recording.add(await watching.run_to_completion())
    await joined.run_to_completion()
    tail = await late.run_to_completion()
    upto = [f for f in replayed if f.get("seq", 0) and f["seq"] <= middle]
    got = RunEncoder(recording.thread_id, after_seq=middle).encode_all(upto + rest + tail)
    expected = [e for seq, events in recording.by_frame() if seq > middle for e in events]
    assert got[len(got) - len(expected) :] == expected
    prelude = got[: len(got) - len(expected)]
    assert [e.type for e in prelude] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    await validate(got, live=recording.live())


def completed_text(text: str) -> ModelEvent:
    return ModelEvent.completed(ModelResponse(AssistantMessage(text)))
