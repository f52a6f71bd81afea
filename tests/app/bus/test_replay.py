"""The replay buffer (agent_app.bus.replay): merged or not, a replay is the run's frames, exactly.

Generated runs of text and reasoning deltas, tool frames and phase changes go through
buffers small enough to merge many times; a socket resuming after any ``seq`` must get the
same text, and the same other frames in the same order, as from a buffer that never merged.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_app.bus.replay import ReplayBuffer, text_from_fields
from agent_app.protocol.frames import encode_delta_frame, encode_frame
from agent_app.protocol.text import DELTA_FAST_CHARS, FRAME_BUDGET
from tests.examples import examples

REQUEST = "r1"
SESSION = "s1"

_frames = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(["text_delta", "reasoning_delta"]),
            st.sampled_from([None, "generating"]),
            st.text(min_size=1, max_size=6),
        ),
        st.tuples(st.just("tool_started"), st.none(), st.just("")),
    ),
    min_size=1,
    max_size=120,
)


def _encoded(seq: int, kind: str, phase: str | None, delta: str) -> tuple[str, bool]:
    if kind == "tool_started":
        frame = {"type": "agent_event", "seq": seq, "request_id": REQUEST, "event": {"type": kind}}
        return encode_frame(frame), False
    return encode_delta_frame(seq, REQUEST, kind, SESSION, phase, delta), True


def _flatten(texts: list[str]) -> list[tuple[str, str | None, str]]:
    """Frames as (type, phase, delta), adjacent deltas of one segment joined."""
    flat: list[tuple[str, str | None, str]] = []
    for text in texts:
        event = json.loads(text)["event"]
        item = (event["type"], event.get("phase"), event.get("delta", ""))
        if flat and item[0].endswith("_delta") and flat[-1][:2] == item[:2]:
            flat[-1] = (item[0], item[1], flat[-1][2] + item[2])
        else:
            flat.append(item)
    return flat


@settings(max_examples=examples(150))
@given(frames=_frames, limit=st.integers(min_value=2, max_value=12), data=st.data())
def test_a_merged_buffer_replays_exactly_what_an_unmerged_one_does(frames, limit, data):
    small, whole = ReplayBuffer(limit), ReplayBuffer(10_000)
    for seq, (kind, phase, delta) in enumerate(frames, start=1):
        text, mergeable = _encoded(seq, kind, phase, delta)
        small.append(seq, text, mergeable=mergeable)
        whole.append(seq, text, mergeable=mergeable)
    after = data.draw(st.one_of(st.none(), st.integers(min_value=0, max_value=len(frames))))
    expected = _flatten(list(whole.frames_after(after)))
    assert _flatten(list(small.frames_after(after))) == expected
    shared = [
        text_from_fields(fields, after) for seq, fields in small.export() if seq > (after or 0)
    ]
    assert _flatten(shared) == expected


def test_a_long_run_of_deltas_merges_into_one_frame_per_segment():
    buffer = ReplayBuffer(100)
    for seq in range(1, 5_001):
        buffer.append(
            seq, encode_delta_frame(seq, REQUEST, "text_delta", SESSION, None, "ab"), mergeable=True
        )
    assert len(buffer) <= 100
    (first, *_) = list(buffer.frames_after(None))
    assert (
        "".join(json.loads(t)["event"]["delta"] for t in buffer.frames_after(None)) == "ab" * 5_000
    )
    assert json.loads(first)["event"]["type"] == "text_delta"
    tail = "".join(json.loads(t)["event"]["delta"] for t in buffer.frames_after(4_000))
    assert tail == "ab" * 1_000


@settings(max_examples=examples(25))
@given(
    sizes=st.lists(
        st.integers(min_value=1, max_value=DELTA_FAST_CHARS - 9), min_size=2, max_size=40
    ),
    char=st.sampled_from(["x", '"', "\x01", "é", "🙂"]),
    data=st.data(),
)
def test_merged_deltas_never_make_a_frame_over_the_budget(sizes, char, data):
    buffer = ReplayBuffer(3)
    deltas = [f"{seq}:" + char * size for seq, size in enumerate(sizes, start=1)]
    for seq, delta in enumerate(deltas, start=1):
        text = encode_delta_frame(seq, REQUEST, "text_delta", SESSION, "generating", delta)
        buffer.append(seq, text, mergeable=True)
    after = data.draw(st.sampled_from([None, *range(len(deltas))]))
    for texts in (
        list(buffer.frames_after(after)),
        [text_from_fields(fields, after) for seq, fields in buffer.export() if seq > (after or 0)],
    ):
        assert all(len(text.encode("utf-8")) <= FRAME_BUDGET for text in texts)
        assert "".join(json.loads(text)["event"]["delta"] for text in texts) == "".join(
            deltas[after or 0 :]
        )


def test_merged_lone_surrogates_leave_as_escapes():
    buffer = ReplayBuffer(2)
    for seq, delta in enumerate(["a\udfff", "\ud800b", "c\ud83d", "\ude42"], start=1):
        buffer.append(
            seq,
            encode_delta_frame(seq, REQUEST, "text_delta", SESSION, None, delta),
            mergeable=True,
        )
    texts = list(buffer.frames_after(None))
    assert len(texts) < 4  # merged
    for text in texts:
        text.encode("utf-8")  # a socket can write it
    for _, fields in buffer.export():
        json.dumps(fields, ensure_ascii=False).encode("utf-8")  # and Redis can store it
    joined = "".join(json.loads(text)["event"]["delta"] for text in texts)
    assert joined == "a\udfff\ud800bc\ud83d\ude42"
    resumed = [text_from_fields(fields, 2) for seq, fields in buffer.export() if seq > 2]
    assert "".join(json.loads(text)["event"]["delta"] for text in resumed) == "c\ud83d\ude42"
