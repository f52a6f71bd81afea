"""The offline demo model (zett_agent.providers.demo): alone, inside the app's agent, and
over the socket with its approval and ask-user flows."""

from __future__ import annotations

import json

import pytest

from agent_app.agents.factory import build_agent
from agent_app.models import ChatSession
from zett_agent.agent import AgentRunConfig
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from zett_agent.model import ModelEventType, ModelRequest, ToolDefinition
from zett_agent.providers.demo import (
    EXPRESSION_QUESTION,
    HELP_QUESTION,
    NOTE_QUESTION,
    DemoModel,
)
from zett_agent.providers.demo_answers import CODE_ANSWER, LONG_ANSWER, TABLE_ANSWER
from zett_site.models import Note

ALL_TOOLS = tuple(
    ToolDefinition(name, "d") for name in ("calculate", "current_time", "save_note", "ask_user")
)


async def reply(messages, tools=ALL_TOOLS) -> AssistantMessage:
    events = [e async for e in DemoModel().stream(ModelRequest(tuple(messages), tools=tools))]
    assert events[-1].type is ModelEventType.COMPLETED
    assert all(e.type is not ModelEventType.COMPLETED for e in events[:-1])
    return events[-1].response.message


def only_call(message: AssistantMessage) -> tuple[str, dict]:
    (call,) = message.tool_calls
    return call.name, call.arguments


async def test_arithmetic_goes_through_the_calculator():
    message = await reply([UserMessage("what is 12 \u00d7 (3 + 4)?")])
    assert only_call(message) == ("calculate", {"expression": "12 * (3 + 4)"})


async def test_the_calculator_result_is_reported():
    call = ToolCall("demo_call_1", "calculate", {"expression": "2**10"})
    message = await reply(
        [
            UserMessage("2^10"),
            AssistantMessage(tool_calls=(call,)),
            ToolMessage(call.id, "calculate", "1024"),
        ]
    )
    assert message.tool_calls == () and "1024" in message.content


async def test_the_time_is_asked_of_the_clock_tool_with_the_named_zone():
    message = await reply([UserMessage("What time is it in America/New_York?")])
    assert only_call(message) == ("current_time", {"timezone": "America/New_York"})


async def test_a_note_with_its_text_is_saved_through_save_note():
    message = await reply([UserMessage("Save a note: water the plants")])
    assert only_call(message) == (
        "save_note",
        {"title": "water the plants", "text": "water the plants"},
    )


async def test_an_ambiguous_note_request_asks_what_to_write_then_saves_the_answer():
    asked = await reply([UserMessage("save a note")])
    assert only_call(asked) == ("ask_user", {"question": NOTE_QUESTION})
    answer = ToolMessage(asked.tool_calls[0].id, "ask_user", json.dumps({"answer": "buy bread"}))
    then = await reply([UserMessage("save a note"), asked, answer])
    assert only_call(then) == ("save_note", {"title": "buy bread", "text": "buy bread"})
    assert then.tool_calls[0].id != asked.tool_calls[0].id


async def test_calculate_without_numbers_asks_for_the_expression():
    asked = await reply([UserMessage("can you calculate something?")])
    assert only_call(asked) == ("ask_user", {"question": EXPRESSION_QUESTION})


@pytest.mark.parametrize("text", ["help", "Hello, what can you do?"])
async def test_help_offers_choices_and_explains_the_chosen_one(text):
    asked = await reply([UserMessage(text)])
    name, arguments = only_call(asked)
    assert name == "ask_user" and arguments["question"] == HELP_QUESTION
    answer = ToolMessage(
        asked.tool_calls[0].id, "ask_user", json.dumps({"answer": "Saving a note"})
    )
    then = await reply([UserMessage("help"), asked, answer])
    assert "save a note" in then.content


async def test_a_denied_note_is_acknowledged():
    call = ToolCall("demo_call_1", "save_note", {"title": "t", "text": "t"})
    denied = ToolMessage(call.id, "save_note", "ApprovalDenied: The user denied it", success=False)
    message = await reply([UserMessage("note: t"), AssistantMessage(tool_calls=(call,)), denied])
    assert message.content == "I did not save the note. You denied it, so nothing was written."


@pytest.mark.parametrize("text", ["Is it going to rain?", "hello", "Hi there!", "hey"])
async def test_anything_else_explains_the_demo_and_how_to_configure_a_provider(text):
    # A greeting too: it is answered at once instead of pausing the run on a question.
    message = await reply([UserMessage(text)])
    assert message.tool_calls == ()
    assert "offline demo" in message.content and "ZETT_MODEL" in message.content


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Show me a code example", CODE_ANSWER),
        ("Write a Python function", CODE_ANSWER),
        ("Compare the setups in a table", TABLE_ANSWER),
        ("Write a long answer", LONG_ANSWER),
        ("Tell me a story about dragons", LONG_ANSWER),
    ],
)
async def test_code_tables_and_long_answers_are_written_out(text, answer):
    message = await reply([UserMessage(text)])
    assert message.tool_calls == () and message.content == answer


async def test_the_written_answers_hold_what_they_are_for():
    fences = [line for line in CODE_ANSWER.splitlines() if line.startswith("```")]
    assert fences == ["```python", "```", "```javascript", "```"]
    rows = [line for line in TABLE_ANSWER.splitlines() if line.startswith("|")]
    assert len(rows) == 5 and rows[1].startswith("|---")
    assert len({len(row.split("|")) for row in rows}) == 1  # every row has every column
    assert len(LONG_ANSWER.split()) > 300  # seconds of streaming at the default pace


async def test_the_code_examples_do_what_they_say():
    python = CODE_ANSWER.split("```python\n")[1].split("```")[0]
    printed = []
    exec(compile(python, "demo-example", "exec"), {"print": printed.append})
    assert printed == [[("the", 3), ("and", 2), ("cat", 1)]]


async def test_without_the_tool_it_says_so_instead_of_calling_it():
    message = await reply([UserMessage("what is 1+1")], tools=())
    assert message.tool_calls == () and "calculate" in message.content


async def test_it_is_deterministic_and_streams_word_by_word():
    request = ModelRequest((UserMessage("Tell me a joke"),))
    first = [e async for e in DemoModel().stream(request)]
    second = [e async for e in DemoModel().stream(request)]
    assert first == second
    deltas = [e.delta for e in first if e.type is ModelEventType.TEXT]
    assert len(deltas) > 10 and "".join(deltas) == first[-1].response.message.content


def test_a_negative_pace_is_refused():
    with pytest.raises(ValueError, match="pace"):
        DemoModel(pace=-1)


@pytest.mark.django_db(transaction=True)
async def test_inside_the_app_agent_the_demo_computes_exactly():
    session = await ChatSession.objects.acreate()
    agent = await build_agent(str(session.pk), DemoModel())
    final = await agent.run("what is 1/3 + 1/6?", config=AgentRunConfig(str(session.pk)))
    assert "**0.5**" in final.content


@pytest.mark.django_db(transaction=True)
async def test_over_the_socket_the_demo_saves_a_note_once_approved(sockets, settings):
    settings.ZETT_MODEL = "demo"
    settings.ZETT_DEMO_PACE = 0
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "save a note"})
    frames = await socket.until_event("custom", "ask_user")
    call_id = frames[-1]["event"]["payload"]["tool_call_id"]
    reply_payload = {"tool_call_id": call_id, "answer": "renew the passport"}
    await socket.send(
        {"type": "external_event", "name": "ask_user_response", "payload": reply_payload}
    )
    await socket.expect("external_event_result", accepted_by=["AskUserExtension"])
    frames = await socket.until_event("custom", "approval_requested")
    approval = frames[-1]["event"]["payload"]
    assert approval["arguments"] == {"title": "renew the passport", "text": "renew the passport"}
    await socket.send(
        {
            "type": "external_event",
            "name": "approval_response",
            "payload": {"tool_call_id": approval["tool_call_id"], "approved": True},
        }
    )
    await socket.expect("external_event_result", accepted_by=["ConfirmationExtension"])
    frames = await socket.run_to_completion()
    assert "Saved note" in frames[-1]["event"]["message"]["content"]
    note = await Note.objects.aget()
    assert note.text == "renew the passport" and str(note.session_id) == socket.session_id


@pytest.mark.django_db(transaction=True)
async def test_the_demo_stream_stops_on_cancel_and_keeps_what_was_shown(sockets, settings):
    settings.ZETT_MODEL = "demo"
    settings.ZETT_DEMO_PACE = 3600  # an hour per word: only a cancelled wait lets this end
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Tell me a story"})
    shown = (await socket.until_event("text_delta"))[-1]["event"]["delta"]
    await socket.send({"type": "cancel"})  # cancels the run inside its pace wait
    await socket.until_event("run_cancelled")
    history = (await sockets(socket.session_id)).session_frame["history"]
    assert [(m["role"], m["content"], m["partial"]) for m in history] == [
        ("user", "Tell me a story", False),
        ("assistant", shown, True),
    ]
