"""How an ``ask_user_response`` answers an MCP server's question, and how AG-UI shows one.

No server here: the answer rules (``zett_agent.extensions.form_answers``) and the
``ask_user`` payload the question desk builds are pure; the chat-level behaviour is in
``tests.app.test_mcp_chat``.
"""

from __future__ import annotations

import pytest

from agent_app.agui.interrupts import interrupt_for, replies_for
from agent_app.agui.run_input import ResumeEntry
from agent_app.durable.waits import elicitation_answer, is_mcp_question
from zett_agent.extensions.form_answers import options_of as _options

REASON = {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}
COUNT = {"type": "object", "properties": {"count": {"type": "integer"}}}
SURE = {"type": "object", "properties": {"sure": {"type": "boolean"}}}
COLOUR = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}}}
TWO = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "number"}},
    "required": ["name"],
}


def test_a_text_answers_a_single_field_as_its_type():
    assert elicitation_answer({"answer": "spring"}, REASON) == {
        "action": "accept",
        "content": {"reason": "spring"},
    }
    assert elicitation_answer({"answer": " 3 "}, COUNT)["content"] == {"count": 3}
    assert elicitation_answer({"answer": "yes"}, SURE)["content"] == {"sure": True}
    assert elicitation_answer({"answer": "No"}, SURE)["content"] == {"sure": False}
    assert elicitation_answer({"answer": "blue"}, COLOUR)["content"] == {"colour": "blue"}


def test_an_object_answer_is_the_content_and_the_older_reply_still_reads():
    given = {"answer": {"name": "Ada", "age": 36}, "action": "accept"}
    assert elicitation_answer(given, TWO)["content"] == {"name": "Ada", "age": 36}
    older = {"action": "accept", "content": {"name": "Ada"}}
    assert elicitation_answer(older, TWO)["content"] == {"name": "Ada"}


def test_declining_or_cancelling_needs_no_answer():
    assert elicitation_answer({"action": "decline"}, TWO) == {"action": "decline"}
    assert elicitation_answer({"action": "cancel", "answer": "x"}, TWO) == {"action": "cancel"}


@pytest.mark.parametrize(
    ("payload", "schema", "says"),
    [
        ({"answer": "3.5"}, COUNT, "not a whole number"),
        ({"answer": "many"}, COUNT, "not a number"),
        ({"answer": "perhaps"}, SURE, "not yes or no"),
        ({"answer": "green"}, COLOUR, "does not fit"),
        ({"answer": "Ada"}, TWO, "must be an object"),
        ({"answer": {"age": 3}}, TWO, "does not fit"),
        ({}, REASON, "must be an object"),
        ({"answer": "x", "action": "maybe"}, REASON, "action must be one of"),
    ],
)
def test_an_answer_the_question_cannot_take_is_refused_with_the_reason(payload, schema, says):
    with pytest.raises(ValueError, match=says):
        elicitation_answer(payload, schema)


def test_a_single_enum_field_offers_its_values_as_options():
    assert _options(COLOUR) == ["red", "blue"]
    assert _options(REASON) is None
    assert _options(TWO) is None


def question(schema: dict) -> dict:
    return {
        "session_id": "s",
        "tool_call_id": "call-1.mcp-abc",
        "question": "Why?",
        "options": _options(schema),
        "allow_multiple": False,
        "response_event": "ask_user_response",
        "expires_at": "2026-01-01T12:00:00.000Z",
        "source": "mcp",
        "call_id": "call-1",
        "tool": "files__delete",
        "server": "files",
        "requested_schema": schema,
    }


def test_over_ag_ui_an_mcp_question_is_an_input_required_interrupt():
    assert is_mcp_question(question(REASON))
    interrupt = interrupt_for("ask_user", question(REASON))
    assert interrupt is not None
    assert (interrupt["reason"], interrupt["id"], interrupt["message"]) == (
        "input_required",
        "call-1.mcp-abc",
        "Why?",
    )
    assert interrupt["responseSchema"]["properties"]["answer"] == {"type": "string", "minLength": 1}
    several = interrupt_for("ask_user", question(TWO))
    assert several is not None
    assert several["responseSchema"]["properties"]["answer"] == TWO


def test_an_ag_ui_resume_answers_an_mcp_question_with_a_text_or_the_fields():
    kinds = {"q": "ask_user"}
    (text,) = replies_for(
        [ResumeEntry(interrupt_id="q", status="resolved", payload={"answer": "x"})], kinds
    )
    assert (text.name, text.payload) == ("ask_user_response", {"tool_call_id": "q", "answer": "x"})
    fields = {"answer": {"name": "Ada"}}
    (given,) = replies_for(
        [ResumeEntry(interrupt_id="q", status="resolved", payload=fields)], kinds
    )
    assert given.payload == {"tool_call_id": "q", "answer": {"name": "Ada"}}
