"""``AskUserExtension`` as the upstream library documents it (docs/runtime.md, External events).

Its names are importable constants; the tool's JSON Schema carries the argument limits; a
reply with ``parts`` answers with text and image content instead of a JSON payload.
"""

from __future__ import annotations

import base64

import pytest

from zett_agent.agent import AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.ask_user import (
    ASK_USER_EVENT_NAME,
    ASK_USER_RESPONSE_EVENT,
    ASK_USER_RESPONSE_EVENT_NAME,
    ASK_USER_TOOL_NAME,
    AskUserExtension,
)
from zett_agent.messages import ImageContent, TextContent

from .test_ask_user import answer_event, ask, asking_model

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s", request_id="r")
PIXEL = base64.b64encode(b"\x89PNG fake image bytes").decode()


def test_the_protocol_names_are_constants():
    assert (ASK_USER_TOOL_NAME, ASK_USER_EVENT_NAME) == ("ask_user", "ask_user")
    assert ASK_USER_RESPONSE_EVENT_NAME == ASK_USER_RESPONSE_EVENT == "ask_user_response"


def test_the_schema_states_the_argument_limits():
    schema = AskUserExtension()._tool.parameters["properties"]
    assert schema["question"]["minLength"] == 1
    assert "maxLength" not in schema["question"]  # a long question is shortened by the UI
    options = next(choice for choice in schema["options"]["anyOf"] if choice["type"] == "array")
    assert options["maxItems"] == 20
    assert options["items"]["minLength"] == 1


async def test_too_many_options_fail_the_call_without_asking():
    model = asking_model(question="Pick", options=[f"o{i}" for i in range(21)])
    events, accepted = await ask(model, answer_event(answer="o1"))
    assert accepted == []  # never asked
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert "options" in failed.message.content


async def test_a_reply_with_parts_answers_with_text_and_images():
    parts = [
        {"type": "text", "text": "This one:"},
        {"type": "image", "name": "shot.png", "content_url": f"data:image/png;base64,{PIXEL}"},
        {"type": "text", "text": ""},  # empty text adds nothing
    ]
    model = asking_model(question="Which screenshot?")
    events, accepted = await ask(model, answer_event(parts=parts))
    assert accepted == [["AskUserExtension"]]
    result = next(e for e in events if e.type is T.TOOL_COMPLETED).message
    assert result.content[0] == TextContent("This one:")
    assert isinstance(result.content[1], ImageContent)
    assert result.content[1].source.url == f"data:image/png;base64,{PIXEL}"
    assert len(result.content) == 2


@pytest.mark.parametrize(
    ("part", "error"),
    [
        ({"type": "image", "name": "x", "content_url": "https://example.com/x.png"}, "data URL"),
        ({"type": "image", "name": "x", "content_url": "data:image/png;base64,"}, "empty"),
        ({"type": "video", "url": "x"}, "type"),
        ({"type": "text", "text": "hi", "extra": 1}, "extra"),
    ],
)
async def test_a_malformed_part_fails_the_call_with_the_reason(part, error):
    model = asking_model(question="Which screenshot?")
    events, _ = await ask(model, answer_event(parts=[part]))
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert error in failed.message.content
    assert events[-1].type is T.RUN_COMPLETED


async def test_a_reply_without_parts_is_still_the_json_payload():
    model = asking_model(question="Which colour?")
    events, _ = await ask(model, answer_event(answer="red", parts=[]))
    result = next(e for e in events if e.type is T.TOOL_COMPLETED).message
    assert result.content == '{"tool_call_id": "ask-1", "answer": "red", "parts": []}'


async def test_the_question_event_carries_the_call_that_asks():
    model = asking_model(question="Which colour?")
    events, _ = await ask(model, answer_event(answer="red"))
    (question,) = [e for e in events if e.type is T.CUSTOM]
    assert [call.id for call in question.tool_calls] == ["ask-1"]
    assert question.phase is not None
