"""No frame the server sends reaches 512 KiB, and nothing that fits is lost on the way.

Through the real ASGI app: each huge delta arrives as several frames of its type whose
deltas join to it exactly, a huge tool call or question arrives shortened with its ids
intact, and the stored messages stay whole. Replays of merged deltas and resumes from
inside a split delta keep the same rule and the same frames.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_app.models import ChatMessage, ReplyWait
from agent_app.protocol.frames import MAX_OUTBOUND_BYTES
from tests.app.conftest import RECEIVE_TIMEOUT
from tests.app.llm_doubles import GatedModel, call_tool, completed, say
from zett_agent.messages import AssistantMessage
from zett_agent.model import ModelEvent, ModelResponse
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)

#: Texts of about 600 KB of JSON: plain, escaped twice (quotes), six times (control
#: characters), four bytes a character (emoji), and a mix with line separators.
HUGE_TEXTS = {
    "ascii": "word " * 120_000,
    "quotes": '"' * 300_000,
    "controls": "\x01" * 100_000,
    "emoji": "🙂" * 150_000,
    "mixed": ("ünï \\ \n中文 🙂 \u2028 ") * 30_000,
}


async def sized_frames(socket, match) -> list[tuple[int, dict]]:
    """(UTF-8 bytes, frame) of each frame up to and including the first that ``match``es."""
    frames = []
    while True:
        text = await socket.communicator.receive_from(timeout=RECEIVE_TIMEOUT)
        frame = json.loads(text)
        frames.append((len(text.encode("utf-8")), frame))
        if match(frame):
            return frames


def is_event(event_type: str, name: str | None = None):
    def match(frame: dict) -> bool:
        assert frame["type"] not in ("run_failed", "run_cancelled"), frame
        event = frame.get("event") or {}
        return event.get("type") == event_type and (name is None or event.get("name") == name)

    return match


def small(sized: list[tuple[int, dict]]) -> list[dict]:
    """The frames, once each is known to be under 512 KiB."""
    for size, frame in sized:
        assert size < MAX_OUTBOUND_BYTES, (size, frame["type"], frame.get("event", {}).get("type"))
    return [frame for _, frame in sized]


def events_of_type(frames: list[dict], event_type: str) -> list[dict]:
    return [
        f["event"]
        for f in frames
        if f["type"] == "agent_event" and f["event"]["type"] == event_type
    ]


def joined(frames: list[dict], event_type: str) -> str:
    return "".join(event["delta"] for event in events_of_type(frames, event_type))


def assert_contiguous(frames: list[dict]) -> None:
    seqs = [frame["seq"] for frame in frames if "seq" in frame]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


@pytest.mark.parametrize("kind", list(HUGE_TEXTS))
async def test_a_huge_text_delta_arrives_split_and_joins_to_the_stored_answer(
    sockets, use_model, kind
):
    huge = HUGE_TEXTS[kind]
    use_model(ScriptedModel([[ModelEvent.text(huge), completed(huge)]]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Write a lot"})
    frames = small(await sized_frames(socket, is_event("run_completed")))
    assert len(events_of_type(frames, "text_delta")) > 1
    assert joined(frames, "text_delta") == huge
    assert_contiguous(frames)
    assert frames[-1]["event"]["content_omitted"] is True
    stored = await ChatMessage.objects.aget(role="assistant")
    assert stored.content == huge


async def test_a_huge_reasoning_delta_arrives_split_and_is_stored_whole(sockets, use_model):
    huge = HUGE_TEXTS["mixed"]
    answer = AssistantMessage(content="Done.", reasoning=huge)
    events = [ModelEvent.reasoning(huge), ModelEvent.text("Done."), _completed(answer)]
    use_model(ScriptedModel([events]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Think hard"})
    frames = small(await sized_frames(socket, is_event("run_completed")))
    assert len(events_of_type(frames, "reasoning_delta")) > 1
    assert joined(frames, "reasoning_delta") == huge
    assert joined(frames, "text_delta") == "Done."
    (model_completed,) = events_of_type(frames, "model_completed")
    assert model_completed["content_omitted"] is True  # the deltas carried text and reasoning
    assert model_completed["response"]["usage"] is not None
    stored = await ChatMessage.objects.aget(role="assistant")
    assert (stored.content, stored.reasoning) == ("Done.", huge)


async def test_a_tool_call_with_huge_arguments_streams_them_split_and_shortens_its_events(
    sockets, use_model
):
    text = HUGE_TEXTS["quotes"]
    use_model(ScriptedModel([call_tool("no_such_tool", "big-1", text=text), say("Sorry.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Use a tool"})
    frames = small(await sized_frames(socket, is_event("run_completed")))
    deltas = [event["tool_call_delta"] for event in events_of_type(frames, "tool_call_delta")]
    assert len(deltas) > 1
    assert json.loads("".join(d["arguments_delta"] for d in deltas)) == {"text": text}
    assert (deltas[0]["id"], deltas[0]["name"]) == ("big-1", "no_such_tool")
    assert all(d["index"] == 0 and d["id"] is None for d in deltas[1:])
    for event_type in ("tool_started", "tool_failed"):
        for event in events_of_type(frames, event_type):
            (call,) = event["tool_calls"]
            assert (call["id"], call["name"]) == ("big-1", "no_such_tool")
            assert event["content_truncated"] is True
            assert call["arguments"]["text"].endswith(f"[cut: {len(text)} characters in all]")
    assert events_of_type(frames, "tool_started") or events_of_type(frames, "tool_failed")
    stored = await ChatMessage.objects.filter(role="assistant").order_by("position").afirst()
    assert stored.tool_calls[0]["arguments"] == {"text": text}


async def test_a_huge_question_is_shown_shortened_with_its_ids_and_stored_whole(sockets, use_model):
    question = HUGE_TEXTS["emoji"] + "?"
    use_model(ScriptedModel([call_tool("ask_user", "ask-1", question=question), say("Thanks.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Ask me"})
    frames = small(await sized_frames(socket, is_event("custom", "ask_user")))
    deltas = [event["tool_call_delta"] for event in events_of_type(frames, "tool_call_delta")]
    assert len(deltas) > 1
    arguments = json.loads("".join(d["arguments_delta"] for d in deltas))
    assert arguments == {"question": question}
    asked = frames[-1]["event"]
    assert asked["content_truncated"] is True
    payload = asked["payload"]
    assert (payload["tool_call_id"], payload["response_event"]) == ("ask-1", "ask_user_response")
    assert payload["question"].endswith(f"[cut: {len(question)} characters in all]")
    assert question.startswith(payload["question"].split("\n… [cut:")[0])
    wait = await ReplyWait.objects.aget(tool_call_id="ask-1")
    assert wait.payload["question"] == question
    answer = {"tool_call_id": "ask-1", "answer": "Yes"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": answer})
    small(await sized_frames(socket, is_event("run_completed")))
    stored = await ChatMessage.objects.filter(role="assistant").order_by("position").afirst()
    assert stored.tool_calls[0]["arguments"] == {"question": question}


async def test_a_replay_of_merged_deltas_keeps_every_frame_under_the_limit(
    sockets, use_model, settings
):
    settings.ZETT_REPLAY_FRAMES = 8
    pieces = [f"{i:05d}" + "x" * 60_000 for i in range(24)]  # 1.4 MB in 24 deltas
    gate = asyncio.Event()
    use_model(GatedModel([*map(ModelEvent.text, pieces), gate, completed("".join(pieces))]))
    watcher = await sockets()
    await watcher.send({"type": "user_message", "content": "Stream"})
    seen = small(
        await sized_frames(watcher, lambda f: f.get("event", {}).get("delta") == pieces[-1])
    )
    late = await sockets(watcher.session_id)
    replayed = small(
        await sized_frames(late, lambda f: f.get("event", {}).get("delta", "").endswith(pieces[-1]))
    )
    assert len(replayed) < len(seen)  # the deltas were merged …
    assert len(events_of_type(replayed, "text_delta")) > 2  # … into several frames
    assert joined(replayed, "text_delta") == "".join(pieces)
    gate.set()
    small(await sized_frames(watcher, is_event("run_completed")))
    small(await sized_frames(late, is_event("run_completed")))


@pytest.mark.parametrize("replay_frames", [None, 2])
async def test_resuming_inside_a_split_delta_gets_exactly_its_remaining_pieces(
    sockets, use_model, settings, replay_frames
):
    if replay_frames:
        settings.ZETT_REPLAY_FRAMES = replay_frames  # the pieces are merged as far as fits
    huge = HUGE_TEXTS["controls"] * 3  # 1.8 MB of JSON: four pieces
    gate = asyncio.Event()
    use_model(GatedModel([ModelEvent.text(huge), gate, completed(huge)]))
    watcher = await sockets()
    await watcher.send({"type": "user_message", "content": "Stream"})
    got: list[str] = []

    def whole(frame: dict) -> bool:
        got.append(frame.get("event", {}).get("delta", ""))
        return "".join(got) == huge

    seen = small(await sized_frames(watcher, whole))
    split = [f for f in seen if f["type"] == "agent_event" and f["event"]["type"] == "text_delta"]
    assert len(split) >= 4
    for index in (0, 2):
        after = split[index]["seq"]
        late = await sockets(watcher.session_id, after_seq=after)
        rest = small(await sized_frames(late, lambda f: f.get("seq") == split[-1]["seq"]))
        assert all(f["seq"] > after for f in rest)
        before = "".join(f["event"]["delta"] for f in split[: index + 1])
        assert before + joined(rest, "text_delta") == huge
    full = await sockets(watcher.session_id)
    replay = small(await sized_frames(full, lambda f: f.get("seq") == split[-1]["seq"]))
    assert joined(replay, "text_delta") == huge
    gate.set()
    small(await sized_frames(watcher, is_event("run_completed")))


def _completed(message: AssistantMessage) -> ModelEvent:
    return ModelEvent.completed(ModelResponse(message))
