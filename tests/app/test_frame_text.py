"""The delta frames the live session builds as text are the frames the encoder would write."""

from __future__ import annotations

import json

import pytest

from agent_app.protocol import agent_event_frame, encode_delta_frame, encode_frame, fit_event
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
