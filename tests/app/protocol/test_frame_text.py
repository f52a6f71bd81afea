"""The delta frames the live session builds as text are the frames the encoder would write."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_app.protocol.frames import agent_event_frame, encode_delta_frame, encode_frame, fit_event
from agent_app.protocol.text import (
    DELTA_FAST_CHARS,
    FRAME_BUDGET,
    FRAME_FAST_CHARS,
    MAX_OUTBOUND_BYTES,
    TOOL_RESULT_KEEP,
    event_frame_text,
    fits,
    split_event,
    split_text,
    text_bytes,
)
from tests.examples import examples
from zett_agent.events import AgentEvent, AgentEventType, AgentPhase
from zett_agent.serialization import event_to_dict

DELTA_KINDS = [
    AgentEventType.TEXT_DELTA,
    AgentEventType.REASONING_DELTA,
    AgentEventType.COMPACTION_TEXT_DELTA,
    AgentEventType.COMPACTION_REASONING_DELTA,
]
DELTAS = [
    "",
    "x",
    "plain words ",
    'quote " and backslash \\ and slash /',
    "control \n\r\t\b\f \x00 \x1f \x7f",
    "ünïcödé, 中文, emoji 🙂 and a pair \ud83d\ude42",
    "lone surrogates \ud800 and \udfff, then text",
    "\u2028\u2029 line separators",
    "x" * 70_000,
]


@pytest.mark.parametrize("kind", DELTA_KINDS)
@pytest.mark.parametrize("phase", [None, *AgentPhase])
@pytest.mark.parametrize("delta", DELTAS)
def test_delta_frame_text_is_the_encoded_frame(kind, phase, delta):
    event = AgentEvent(kind, "5f0c6f3e-session-\ud800", phase=phase, delta=delta)
    request_id = 'req-"quoted"-id'
    expected = encode_frame(agent_event_frame(41, request_id, fit_event(event_to_dict(event))))
    text = encode_delta_frame(
        41,
        request_id,
        event.type._value_,
        event.session_id,
        None if phase is None else phase._value_,
        event.delta,
    )
    assert text == expected
    text.encode("utf-8")  # a socket can always write it
    assert json.loads(text)["event"]["type"] == kind.value


def test_delta_event_dicts_keep_their_shape():
    event = AgentEvent(AgentEventType.TEXT_DELTA, "s", phase=AgentPhase.GENERATING, delta="hi")
    data = event_to_dict(event)
    assert data == {"type": "text_delta", "session_id": "s", "phase": "generating", "delta": "hi"}
    assert type(data["type"]) is str and type(data["phase"]) is str


# --- the 512 KiB rule (agent_app.protocol.text) ---------------------------------------------

SESSION_ID = "5f0c6f3e-1d2a-4c3b-9e8f-0a1b2c3d4e5f"
REQUEST_ID = "7d1b2c3a-4e5f-4a6b-8c9d-0e1f2a3b4c5d"
PAIR = "\ud83d\ude42"  # an emoji as two code points: split, each half is a lone surrogate


@settings(max_examples=examples(300))
@given(
    text=st.text(st.characters(exclude_categories=()), min_size=1, max_size=300)
    | st.lists(
        st.sampled_from(["a", '"', "\x01", "é", "中", "🙂", PAIR, "\ud800"]), min_size=1
    ).map("".join),
    room=st.integers(min_value=12, max_value=90),
)
def test_split_text_gives_full_pieces_that_join_to_the_text_and_keep_pairs(text, room):
    pieces = split_text(text, room)
    assert "".join(pieces) == text
    for index, piece in enumerate(pieces):
        assert piece
        assert text_bytes(piece) == len(_literal(piece).encode("utf-8")) - 2 <= room
        if index < len(pieces) - 1:
            assert text_bytes(piece) > room - 12  # greedy: only the last piece is short
            assert not (piece[-1] == "\ud83d" and pieces[index + 1][0] == "\ude42")


def _literal(text: str) -> str:
    return encode_frame({"d": text})[len('{"d": ') : -1]


@pytest.mark.parametrize("char", ["x", '"', "\x01", "🙂", "\ud800"])
def test_a_delta_within_the_fast_bound_always_fits_one_frame(char):
    delta = char * DELTA_FAST_CHARS
    text = encode_delta_frame(
        2**63 - 1, REQUEST_ID, "reasoning_delta", SESSION_ID, "generating", delta
    )
    assert len(text.encode("utf-8")) <= FRAME_BUDGET < MAX_OUTBOUND_BYTES


def test_a_frame_within_the_fast_length_always_fits():
    worst = "🙂" * FRAME_FAST_CHARS  # 4 bytes a character: the most UTF-8 takes
    assert len(worst.encode("utf-8")) <= FRAME_BUDGET


@pytest.mark.parametrize(
    ("kind", "holder", "key", "fields"),
    [
        ("text_delta", None, "delta", {}),
        (
            "tool_call_delta",
            "tool_call_delta",
            "arguments_delta",
            {"index": 2, "id": "c", "name": "t"},
        ),
        ("server_tool_input_delta", "server_tool_input_delta", "delta", {"call_id": "srv-1"}),
    ],
)
def test_a_delta_too_large_for_a_frame_is_split_into_events_of_its_type(kind, holder, key, fields):
    delta = ('{"q": "' + '\x01"🙂' * 150_000) + PAIR * 10_000
    event = {"type": kind, "session_id": SESSION_ID, "phase": "generating"}
    event.update({key: delta} if holder is None else {holder: {**fields, key: delta}})
    pieces = split_event(REQUEST_ID, event)
    assert len(pieces) > 1
    parts = [piece[key] if holder is None else piece[holder][key] for piece in pieces]
    assert "".join(parts) == delta
    for index, piece in enumerate(pieces):
        assert piece["type"] == kind and piece["session_id"] == SESSION_ID
        assert fits(encode_frame(agent_event_frame(2**63 - 1, REQUEST_ID, piece)))
        if holder is not None:
            kept = {name for name in fields if index == 0 or name in ("index", "call_id")}
            assert {name for name, value in piece[holder].items() if value is not None} == {
                *kept,
                key,
            }


def test_a_huge_custom_event_keeps_its_ids_and_cuts_its_text_with_a_marker():
    question = "Which? " * 100_000
    payload = {
        "tool_call_id": "ask-1",
        "question": question,
        "options": ["a", "b"],
        "response_event": "ask_user_response",
    }
    event = {"type": "custom", "session_id": SESSION_ID, "phase": None, "name": "ask_user"}
    event["payload"] = payload
    text = event_frame_text(7, REQUEST_ID, event)
    assert fits(text)
    sent = json.loads(text)["event"]
    assert sent["content_truncated"] is True
    assert {key: sent[key] for key in ("type", "session_id", "name")} == {
        "type": "custom",
        "session_id": SESSION_ID,
        "name": "ask_user",
    }
    assert sent["payload"] == {**payload, "question": sent["payload"]["question"]}
    shown = sent["payload"]["question"]
    assert shown == question[:TOOL_RESULT_KEEP] + f"\n… [cut: {len(question)} characters in all]"
    assert payload["question"] == question  # the event itself (stored elsewhere) is untouched


def test_an_event_that_no_cut_can_fit_keeps_only_what_identifies_it():
    event = {"type": "custom", "session_id": "s", "phase": None, "name": "many"}
    event["payload"] = {"items": list(range(200_000))}
    assert fit_event(event) == {
        "type": "custom",
        "session_id": "s",
        "phase": None,
        "content_omitted": True,
    }


def test_small_events_are_sent_as_they_are():
    event = {"type": "tool_started", "session_id": "s", "phase": None, "tool_calls": []}
    assert fit_event(event) is event
    assert split_event(REQUEST_ID, event) == [event]
    delta = {"type": "text_delta", "session_id": "s", "phase": None, "delta": "hi"}
    assert split_event(REQUEST_ID, delta) == [delta]
