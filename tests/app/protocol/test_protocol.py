"""Frame parsing and the wire shape of outbound frames (agent_app.protocol.frames)."""

from __future__ import annotations

import json

import pytest

from agent_app.protocol.frames import (
    MAX_CONTENT_BYTES,
    MAX_FRAME_BYTES,
    AgentEventFrame,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    ExternalEventFrame,
    ExternalEventResultFrame,
    FrameError,
    HistoryPageFrame,
    PingFrame,
    PongFrame,
    RunCancelledFrame,
    RunFailedFrame,
    RunStartedFrame,
    SessionFrame,
    SteerFrame,
    UserMessageFrame,
    agent_event_frame,
    encode_frame,
    parse_frame,
    run_started_frame,
    steering_refusal,
)
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage
from zett_agent.serialization import event_to_dict


def code_of(text: str) -> ErrorCode:
    with pytest.raises(FrameError) as caught:
        parse_frame(text)
    assert caught.value.message.strip()
    return caught.value.code


def test_each_inbound_type_parses_into_its_frame():
    assert parse_frame('{"type": "user_message", "content": "hi"}') == UserMessageFrame(
        type="user_message", content="hi"
    )
    assert parse_frame(
        '{"type": "external_event", "name": "n", "payload": {"a": [1]}}'
    ) == ExternalEventFrame(type="external_event", name="n", payload={"a": [1]})
    assert parse_frame('{"type": "steer", "content": "left"}') == SteerFrame(
        type="steer", content="left"
    )
    assert parse_frame('{"type": "cancel"}') == CancelFrame(type="cancel")
    assert parse_frame('{"type": "ping"}') == PingFrame(type="ping")


def test_unknown_extra_keys_are_ignored_for_forward_compatibility():
    assert parse_frame('{"type": "ping", "id": 4}') == PingFrame(type="ping")


def test_invalid_json_is_bad_json():
    assert code_of("{oops") is ErrorCode.BAD_JSON


@pytest.mark.parametrize("text", ["[]", "3", "null", '"ping"', "{}", '{"type": null}'])
def test_anything_but_an_object_with_a_string_type_is_bad_frame(text):
    assert code_of(text) is ErrorCode.BAD_FRAME


def test_an_unknown_type_is_unknown_type_and_names_the_known_ones():
    with pytest.raises(FrameError) as caught:
        parse_frame('{"type": "dance"}')
    assert caught.value.code is ErrorCode.UNKNOWN_TYPE
    assert "user_message" in caught.value.message


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "user_message"},
        {"type": "user_message", "content": ""},
        {"type": "user_message", "content": " \n\t"},
        {"type": "user_message", "content": "\x1c\x1f"},  # blank to str.strip, not to \S
        {"type": "steer", "content": "\u2003"},
        {"type": "user_message", "content": 12},
        {"type": "external_event", "payload": {}},
        {"type": "external_event", "name": 3, "payload": {}},
        {"type": "external_event", "name": "x", "payload": "yes"},
        {"type": "steer", "content": None},
    ],
)
def test_missing_blank_or_ill_typed_fields_are_bad_frame(frame):
    assert code_of(json.dumps(frame)) is ErrorCode.BAD_FRAME


def test_the_message_of_a_bad_frame_names_the_field():
    with pytest.raises(FrameError, match="'content' is required"):
        parse_frame('{"type": "user_message"}')
    with pytest.raises(FrameError, match="'content' cannot be blank"):
        parse_frame('{"type": "user_message", "content": "\\u001c"}')


def test_content_is_limited_to_32_kib_of_utf8():
    parse_frame(json.dumps({"type": "user_message", "content": "a" * MAX_CONTENT_BYTES}))
    too_long = json.dumps({"type": "steer", "content": "a" * (MAX_CONTENT_BYTES + 1)})
    assert code_of(too_long) is ErrorCode.TOO_LARGE
    wide = json.dumps({"type": "user_message", "content": "€" * (MAX_CONTENT_BYTES // 3 + 1)})
    assert code_of(wide) is ErrorCode.TOO_LARGE


def test_frames_are_limited_to_256_kib_before_they_are_parsed():
    assert code_of("x" * (MAX_FRAME_BYTES + 1)) is ErrorCode.TOO_LARGE
    envelope = json.dumps({"type": "external_event", "name": "n", "payload": {"f": ""}})
    exactly = json.dumps(
        {
            "type": "external_event",
            "name": "n",
            "payload": {"f": "y" * (MAX_FRAME_BYTES - len(envelope))},
        }
    )
    assert len(exactly) == MAX_FRAME_BYTES
    parse_frame(exactly)


def test_outbound_frames_dump_to_the_documented_shapes():
    session = SessionFrame(
        session_id="s",
        title="",
        history=[],
        has_more_history=False,
        runs=[],
        pending=[],
        usage={"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        support={"needs_human": False, "taken_over": False, "staff": None},
        active_request_id=None,
        last_seq=0,
    )
    assert session.dump() == {
        "type": "session",
        "session_id": "s",
        "title": "",
        "history": [],
        "has_more_history": False,
        "runs": [],
        "pending": [],
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        "support": {"needs_human": False, "taken_over": False, "staff": None},
        "active_request_id": None,
        "last_seq": 0,
    }
    started = RunStartedFrame(
        seq=1,
        request_id="r",
        content="hi",
        kind="message",
        resumed_from=None,
        position=0,
        created_at="2026-11-30T12:00:00Z",
    )
    assert started.dump() == {
        "type": "run_started",
        "seq": 1,
        "request_id": "r",
        "content": "hi",
        "kind": "message",
        "resumed_from": None,
        "position": 0,
        "message_id": None,
        "superseded_from": None,
        "created_at": "2026-11-30T12:00:00Z",
        "attachments": [],
        "title": "",
    }
    assert AgentEventFrame(seq=3, request_id="r", event={"type": "text_delta"}).dump() == {
        "type": "agent_event",
        "seq": 3,
        "request_id": "r",
        "event": {"type": "text_delta"},
    }
    failed = RunFailedFrame(seq=4, request_id="r", error={"type": "ValueError", "message": "m"})
    assert failed.dump() == {
        "type": "run_failed",
        "seq": 4,
        "request_id": "r",
        "error": {"type": "ValueError", "message": "m"},
    }
    assert RunCancelledFrame(seq=5, request_id="r").dump() == {
        "type": "run_cancelled",
        "seq": 5,
        "request_id": "r",
    }
    result = ExternalEventResultFrame(
        name="n", correlation_id=None, accepted_by=[], reason="not_running"
    )
    assert result.dump() == {
        "type": "external_event_result",
        "name": "n",
        "correlation_id": None,
        "accepted_by": [],
        "reason": "not_running",
    }
    page = HistoryPageFrame(messages=[], runs=[], has_more=False)
    assert page.dump() == {"type": "history_page", "messages": [], "runs": [], "has_more": False}
    assert ErrorFrame(code=ErrorCode.BUSY, message="m").dump() == {
        "type": "error",
        "code": "busy",
        "message": "m",
    }
    assert PongFrame().dump() == {"type": "pong"}


@pytest.mark.parametrize(
    "event",
    [
        AgentEvent(AgentEventType.TEXT_DELTA, "s", delta='héllo \u2028 "x"'),
        AgentEvent(AgentEventType.TOOL_STARTED, "s", tool_calls=[ToolCall("c", "t", {"a": [1]})]),
        AgentEvent(
            AgentEventType.TOOL_COMPLETED,
            "s",
            tool_calls=[ToolCall("c", "t", {})],
            message=ToolMessage("c", "t", "42"),
        ),
        AgentEvent(AgentEventType.RUN_COMPLETED, "s", message=AssistantMessage("done")),
        AgentEvent(AgentEventType.CUSTOM, "s", name="ask_user", payload={"options": ["ü"]}),
    ],
)
def test_the_fast_agent_event_frame_is_exactly_the_documented_model(event):
    data = event_to_dict(event)
    fast = agent_event_frame(7, "r", data)
    assert fast == AgentEventFrame(seq=7, request_id="r", event=data).dump()
    assert json.loads(encode_frame(fast)) == fast


def test_frames_are_encoded_as_utf8_text_without_escapes():
    text = encode_frame(ErrorFrame(code=ErrorCode.BUSY, message="déjà ✓").dump())
    assert text == '{"type": "error", "code": "busy", "message": "déjà ✓"}'


def test_the_error_codes_are_exactly_those_of_the_spec():
    assert {code.value for code in ErrorCode} == {
        "bad_json",
        "bad_frame",
        "unknown_type",
        "too_large",
        "busy",
        "not_running",
        "forbidden",
        "unknown_assistant",
        "rate_limited",
        "budget_exceeded",
        "internal",
    }


# --- hostile input (docs/security.md): parsing never raises anything but FrameError -----


@pytest.mark.parametrize(
    "text",
    [
        "[" * 1000,
        "[" * 100_000,
        "[" * 33 + "]" * 33,
        '{"type": "ping", "a": ' + "[" * 40 + "]" * 40 + "}",
        '{"type": "ping", "x": NaN}',
        '{"type": "ping", "x": Infinity}',
        '{"type": "ping", "x": -Infinity}',
        '{"type": "ping", "x": 1e999}',
        '{"type": "ping", "x": ' + "9" * 5000 + "}",
    ],
)
def test_deep_nesting_and_numbers_that_are_not_json_are_bad_json(text):
    assert code_of(text) is ErrorCode.BAD_JSON


def test_nesting_up_to_32_levels_is_accepted():
    nested = {"type": "external_event", "name": "n", "payload": {}}
    inner = nested["payload"]
    for _ in range(29):  # frame, payload, then 29 more objects, then one array: 32 levels
        inner["a"] = {}
        inner = inner["a"]
    inner["list"] = [1]
    parse_frame(json.dumps(nested))
    inner["list"] = [[1]]
    assert code_of(json.dumps(nested)) is ErrorCode.BAD_JSON


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "user_message", "content": "a\x00b"},
        {"type": "user_message", "content": "\ud800"},
        {"type": "steer", "content": "ok \udfff"},
        {"type": "external_event", "name": "n", "payload": {"tool_call_id": "\ud800"}},
        {"type": "external_event", "name": "n", "payload": {"\x00": 1}},
        {"type": "external_event", "name": "n", "payload": {"deep": [["\ud83d"]]}},
        {"type": "\ud800"},
        {"type": "ping", "x": 2**63},
        {"type": "ping", "x": -(2**63) - 1},
    ],
)
def test_nul_unpaired_surrogates_and_out_of_range_integers_are_bad_frame(frame):
    assert code_of(json.dumps(frame)) is ErrorCode.BAD_FRAME


def test_paired_surrogates_and_64_bit_integers_are_fine():
    assert parse_frame(json.dumps({"type": "user_message", "content": "\U0001f600"})) == (
        UserMessageFrame(type="user_message", content="\U0001f600")
    )
    parse_frame(json.dumps({"type": "ping", "x": [2**63 - 1, -(2**63), 1.5e300]}))


def test_an_error_message_never_echoes_what_cannot_be_sent():
    for text in ['{"type": "' + "x" * 10_000 + '"}', '{"type": "\\ud83d\\ude00 \u2028"}']:
        with pytest.raises(FrameError) as caught:
            parse_frame(text)
        assert len(caught.value.message) < 300
        caught.value.message.encode("utf-8")


def test_steering_has_the_same_content_rules_whichever_frame_carries_it():
    # A steer frame is refused with an error; an external_event parses, and its payload is
    # refused with a reason in its external_event_result.
    assert code_of(json.dumps({"type": "steer", "content": "a" * 200_000})) is ErrorCode.TOO_LARGE
    assert code_of(json.dumps({"type": "steer", "content": "  "})) is ErrorCode.BAD_FRAME
    assert steering_refusal({"content": "a" * MAX_CONTENT_BYTES}) is None
    assert steering_refusal({"content": "é" * (MAX_CONTENT_BYTES // 2 + 1)}) == "too_large"
    assert steering_refusal({"content": "a" * 200_000}) == "too_large"
    assert steering_refusal({"content": "  "}) == "invalid"
    assert steering_refusal({"content": ["x"]}) == "invalid"
    assert steering_refusal({}) == "invalid"


def test_encoding_never_fails_and_always_gives_utf8_json():
    frame = {
        "type": "external_event_result",
        "correlation_id": "\ud800",
        "nan": float("nan"),
        "inf": [float("inf")],
        "odd": {1: object()},
        "text": "é \U0001f600",
    }
    text = encode_frame(frame)
    text.encode("utf-8")
    assert json.loads(text) == {
        "type": "external_event_result",
        "correlation_id": "\ud800",
        "nan": None,
        "inf": [None],
        "odd": {"1": json.loads(text)["odd"]["1"]},
        "text": "é \U0001f600",
    }
    assert encode_frame({"a": "\udc00x"}) == '{"a": "\\udc00x"}'


@pytest.mark.parametrize(
    "fields",
    [
        {"content": "hi", "resumed_from": None, "position": 0, "message_id": 7},
        {"content": None, "resumed_from": "r0", "position": None, "message_id": None},
        {
            "content": "edited",
            "resumed_from": None,
            "position": 4,
            "message_id": 9,
            "superseded_from": 2,
            "attachments": [
                {
                    "id": "a1",
                    "name": "x.pdf",
                    "media_type": "application/pdf",
                    "size": 3,
                    "url": "/a/1",
                }
            ],
            "title": "Edited",
        },
    ],
)
def test_run_started_is_built_as_the_model_dumps_it(fields):
    """``run_started_frame`` (the plain dict a run sends) holds to ``RunStartedFrame``."""
    full = {
        "seq": 3,
        "request_id": "r",
        "kind": "message",
        "created_at": "2026-11-30T12:00:00Z",
        "superseded_from": None,
        "attachments": [],
        "title": "",
        **fields,
    }
    built = run_started_frame(**full)
    dumped = RunStartedFrame(**full).dump()
    assert built == dumped
    assert list(built) == list(dumped)  # the same text on the socket, key for key
