"""What an AG-UI client sends: ``RunAgentInput`` bodies, ``resume`` answers, capabilities.

Bodies are built with ``ag-ui-protocol``'s own models where they are valid, so what the
reference SDK writes is what is parsed; malformed ones are refused with a code.
"""

from __future__ import annotations

import json
import uuid

import pytest
from ag_ui.core import (
    AgentCapabilities,
    ResumeEntry,
    RunAgentInput,
    SystemMessage,
    TextPart,
    Tool,
    UserMessage,
)

from agent_app.agui.capabilities import capabilities
from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.agui.interrupts import interrupt_for, refusal_code, replies_for
from agent_app.agui.run_input import parse_run_input
from zett_agent.extensions.external import ExternalEvent

THREAD = str(uuid.uuid4())


def body(**fields) -> str:
    """A body the reference SDK writes (camelCase, optional fields left out)."""
    fields.setdefault("thread_id", THREAD)
    fields.setdefault("run_id", "client-run-1")
    fields.setdefault("messages", [])
    return json.dumps(RunAgentInput(**fields).model_dump(mode="json", by_alias=True))


def refused(text: str | bytes, code: ErrorCode) -> AguiError:
    with pytest.raises(AguiError) as caught:
        parse_run_input(text)
    assert caught.value.code is code, caught.value.message
    assert caught.value.message.strip()
    assert caught.value.as_dict() == {"code": code.value, "message": caught.value.message}
    return caught.value


# --- a new message ----------------------------------------------------------------------------


def test_the_last_user_message_is_the_new_message():
    text = body(
        messages=[
            SystemMessage(id="s", content="Be brief."),
            UserMessage(id="u1", content="An earlier question"),
            UserMessage(id="u2", content="What is the capital of France?"),
        ],
        tools=[Tool(name="client_tool", description="runs in the browser", parameters={})],
        state={"anything": True},
        forwarded_props={"x": 1},
    )
    request = parse_run_input(text)
    assert request.thread_id == THREAD
    assert request.client_run_id == "client-run-1"
    assert request.text == "What is the capital of France?"
    assert request.resume == ()


def test_text_parts_are_joined_and_the_thread_id_is_written_canonically():
    thread = uuid.uuid4()
    text = body(
        thread_id=str(thread).upper(),
        messages=[UserMessage(id="u", content=[TextPart(text="One."), TextPart(text="Two.")])],
    )
    request = parse_run_input(text.encode("utf-8"))
    assert request.thread_id == str(thread)
    assert request.text == "One.\n\nTwo."


def test_unknown_keys_are_allowed():
    data = json.loads(body(messages=[UserMessage(id="u", content="Hi")]))
    data["somethingNew"] = {"nested": [1]}
    data["messages"][0]["extra"] = "kept"
    assert parse_run_input(json.dumps(data)).text == "Hi"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("{not json", ErrorCode.BAD_JSON),
        ('{"threadId": NaN}', ErrorCode.BAD_JSON),
        (b"\xff\xfe", ErrorCode.BAD_JSON),
        ("[" * 100_000 + "]" * 100_000, ErrorCode.BAD_JSON),
        ("[]", ErrorCode.BAD_INPUT),
        ('"a string"', ErrorCode.BAD_INPUT),
    ],
)
def test_a_body_that_is_not_a_json_object_is_refused(text, code):
    refused(text, code)


def test_a_body_that_is_no_run_agent_input_says_where():
    error = refused(json.dumps({"threadId": THREAD, "runId": "r"}), ErrorCode.BAD_INPUT)
    assert "messages" in error.message
    data = json.loads(body(messages=[UserMessage(id="u", content="Hi")]))
    data["messages"][0]["role"] = "robot"
    assert "messages.0.role" in refused(json.dumps(data), ErrorCode.BAD_INPUT).message
    data = json.loads(body(messages=[]))
    data["resume"] = [{"interruptId": "a", "status": "maybe"}]
    assert "resume.0.status" in refused(json.dumps(data), ErrorCode.BAD_INPUT).message


def test_a_thread_id_that_is_no_chat_id_is_refused():
    refused(body(thread_id="thread-1", messages=[UserMessage(id="u", content="Hi")]),
            ErrorCode.BAD_THREAD_ID)  # fmt: skip


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [UserMessage(id="u", content="Hi"), SystemMessage(id="s", content="later")],
        [UserMessage(id="u", content="   \n")],
    ],
)
def test_without_resume_the_last_message_must_be_the_users_text(messages):
    refused(body(messages=messages), ErrorCode.NO_USER_MESSAGE)


def test_text_image_and_document_parts_are_taken_and_others_and_urls_refused():
    data = json.loads(body(messages=[UserMessage(id="u", content="x")]))
    data["messages"][0]["content"] = [
        {"type": "text", "text": "Look:"},
        {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}},
    ]
    assert "not fetched" in refused(json.dumps(data), ErrorCode.UNSUPPORTED_CONTENT).message
    data["messages"][0]["content"][1] = {"type": "video", "source": {"type": "url", "value": "x"}}
    assert "'video'" in refused(json.dumps(data), ErrorCode.UNSUPPORTED_CONTENT).message
    data["messages"][0]["content"][1] = {
        "type": "document",
        "source": {"type": "data", "value": "aGk=", "mimeType": "text/plain"},
    }
    request = parse_run_input(json.dumps(data))
    assert request.text == "Look:"
    (file,) = request.files
    assert (file.where, file.name, file.data) == ("content[1]", "document", b"hi")


def test_a_message_over_32_kib_or_with_nul_is_refused():
    refused(body(messages=[UserMessage(id="u", content="é" * 20_000)]), ErrorCode.TOO_LARGE)
    refused(body(messages=[UserMessage(id="u", content="a\x00b")]), ErrorCode.BAD_INPUT)
    error = refused(b" " * (4 * 1024 * 1024 + 1), ErrorCode.TOO_LARGE)
    assert error.status == 413


# --- resume -----------------------------------------------------------------------------------

KINDS = {"ask-1": "ask_user", "note-1": "approval"}


def resume(*entries: ResumeEntry):
    return parse_run_input(body(messages=[], resume=list(entries))).resume


def test_a_resume_needs_no_messages_and_becomes_the_replies_a_socket_sends():
    request = parse_run_input(
        body(
            messages=[UserMessage(id="u", content="ignored: zett keeps the history")],
            resume=[
                ResumeEntry(interrupt_id="ask-1", status="resolved", payload={"answer": "Rome"}),
                ResumeEntry(
                    interrupt_id="note-1",
                    status="resolved",
                    payload={"approved": True, "digest": "abc"},
                ),
            ],
        )
    )
    assert request.text is None
    assert replies_for(request.resume, KINDS) == [
        ExternalEvent("ask_user_response", {"tool_call_id": "ask-1", "answer": "Rome"}),
        ExternalEvent(
            "approval_response", {"tool_call_id": "note-1", "approved": True, "digest": "abc"}
        ),
    ]


def test_answers_in_the_forms_a_question_takes():
    def answer(payload):
        entry = ResumeEntry(interrupt_id="ask-1", status="resolved", payload=payload)
        return replies_for(resume(entry), KINDS)[0].payload["answer"]

    assert answer("Paris") == "Paris"  # a bare string is the answer
    assert answer({"answer": ["Paris", "Rome"]}) == ["Paris", "Rome"]


def test_a_denial_and_a_dismissed_approval_deny_the_call():
    for entry in (
        ResumeEntry(interrupt_id="note-1", status="resolved", payload={"approved": False}),
        ResumeEntry(interrupt_id="note-1", status="cancelled"),
    ):
        assert replies_for(resume(entry), KINDS) == [
            ExternalEvent("approval_response", {"tool_call_id": "note-1", "approved": False})
        ]


@pytest.mark.parametrize(
    ("entries", "code"),
    [
        ([ResumeEntry(interrupt_id="nope", status="resolved", payload="x")],
         ErrorCode.UNKNOWN_INTERRUPT),
        ([ResumeEntry(interrupt_id="ask-1", status="resolved", payload="a"),
          ResumeEntry(interrupt_id="ask-1", status="resolved", payload="b")],
         ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="note-1", status="resolved", payload={"approved": "yes"})],
         ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="note-1", status="resolved")], ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="note-1", status="resolved",
                      payload={"approved": True, "digest": 5})], ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="ask-1", status="cancelled")], ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="ask-1", status="resolved", payload={"answer": "  "})],
         ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="ask-1", status="resolved", payload={"answer": []})],
         ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="ask-1", status="resolved", payload={"answer": 3})],
         ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="ask-1", status="resolved", payload="a\ud800")],
         ErrorCode.INVALID_RESUME),
        ([ResumeEntry(interrupt_id="ask-1", status="resolved", payload="x" * 40_000)],
         ErrorCode.TOO_LARGE),
    ],
)  # fmt: skip
def test_a_resume_that_answers_nothing_is_refused(entries, code):
    with pytest.raises(AguiError) as caught:
        replies_for(resume(*entries), KINDS)
    assert caught.value.code is code
    assert "resume[" in caught.value.message


def test_refusals_of_the_reply_path_have_codes():
    assert refusal_code("expired") is ErrorCode.INTERRUPT_EXPIRED
    assert refusal_code("stale") is ErrorCode.INTERRUPT_ANSWERED
    assert refusal_code("mismatch") is ErrorCode.DIGEST_MISMATCH
    assert refusal_code("not_running") is ErrorCode.UNKNOWN_INTERRUPT
    assert refusal_code("internal") is ErrorCode.INTERNAL
    assert refusal_code(None) is ErrorCode.INVALID_RESUME


def test_an_interrupt_has_an_open_answer_without_options_and_a_list_for_several():
    payload = {"tool_call_id": "a", "question": "Name?", "options": None, "allow_multiple": False}
    schema = interrupt_for("ask_user", payload)["responseSchema"]
    assert schema["properties"]["answer"] == {"type": "string", "minLength": 1}
    several = {**payload, "options": ["x", "y"], "allow_multiple": True}
    answer = interrupt_for("ask_user", several)["responseSchema"]["properties"]["answer"]
    assert answer == {
        "type": "array",
        "items": {"type": "string", "enum": ["x", "y"]},
        "minItems": 1,
        "uniqueItems": True,
    }
    assert "expiresAt" not in interrupt_for("ask_user", payload)
    assert interrupt_for("ask_user", payload, "2030-01-01T00:00:00Z")["expiresAt"] == (
        "2030-01-01T00:00:00Z"
    )
    assert interrupt_for("progress", payload) is None
    assert interrupt_for("ask_user", {"question": "no call id"}) is None


# --- capabilities ----------------------------------------------------------------------------


def test_the_capabilities_document_is_ag_ui_and_says_streams_are_resumable():
    document = capabilities(assistant_id="support", name="Support", description="Helps.")
    model = AgentCapabilities.model_validate(document)
    assert model.model_dump(mode="json", by_alias=True) == document
    for part in model.__dict__.values():
        assert not getattr(part, "model_extra", None), part
    assert model.transport.resumable is True and model.transport.streaming is True
    assert model.human_in_the_loop.interrupts is True
    assert model.identity.name == "Support" and model.identity.description == "Helps."
    assert model.tools.client_provided is False


def test_the_protocol_layer_imports_neither_django_nor_the_test_packages():
    """The views sit on it; a program (or another server) can use it without Django, and
    ``ag-ui-protocol`` stays a test dependency."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import agent_app.agui.capabilities, agent_app.agui.encoder, agent_app.agui.errors\n"
        "import agent_app.agui.interrupts, agent_app.agui.run_input, agent_app.agui.sse\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in "
        "('django', 'channels', 'ag_ui', 'ag_ui_validate')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
