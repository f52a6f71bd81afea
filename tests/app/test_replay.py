"""The replay buffer (agent_app.replay): merged or not, a replay is the run's frames, exactly.

Generated runs of text and reasoning deltas, tool frames and phase changes go through
buffers small enough to merge many times; a socket resuming after any ``seq`` must get the
same text, and the same other frames in the same order, as from a buffer that never merged.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_app.protocol import encode_delta_frame, encode_frame
from agent_app.replay import ReplayBuffer, text_from_fields

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


@settings(max_examples=150, deadline=None)
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
