"""Messages: roles, shared keyword fields and content parts (docs/runtime.md, Tools)."""

from __future__ import annotations

import pytest

from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    ImageBytesSource,
    ImageContent,
    ImageUrlSource,
    MessageRole,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)

EVERY_MESSAGE = [
    SystemMessage(content="rules"),
    UserMessage(content="hi"),
    AssistantMessage(content="hello"),
    ToolMessage(tool_call_id="call-1", name="lookup", content="42"),
    AgentMessage(content="be brief"),
]


@pytest.mark.parametrize(
    ("message", "role"),
    [
        (SystemMessage(content="x"), "system"),
        (UserMessage(content="x"), "user"),
        (AssistantMessage(content="x"), "assistant"),
        (ToolMessage(tool_call_id="c", name="t", content="x"), "tool"),
        (AgentMessage(content="x"), "agent"),
    ],
)
def test_each_message_type_speaks_for_its_role(message, role):
    assert message.role == MessageRole(role)
    assert message.role.value == role


@pytest.mark.parametrize("message", EVERY_MESSAGE, ids=lambda m: type(m).__name__)
def test_every_message_defaults_to_persisted_with_empty_attributes(message):
    assert message.attributes == {}
    assert message.persist is True


def test_system_messages_are_not_part_of_the_restorable_history():
    assert SystemMessage(content="rules").include_in_messages is False
    assert UserMessage(content="hi").include_in_messages is True
    assert AssistantMessage(content="a").include_in_messages is True
    assert ToolMessage(tool_call_id="c", name="t", content="r").include_in_messages is True
    assert AgentMessage(content="a").include_in_messages is True


def test_the_shared_fields_are_keyword_only():
    with pytest.raises(TypeError):
        UserMessage("hi", {"source": "web"})  # type: ignore[misc]
    message = UserMessage("hi", attributes={"source": "web"}, persist=False)
    assert message.attributes == {"source": "web"}
    assert message.persist is False


def test_attributes_are_a_fresh_dict_for_every_message():
    first, second = UserMessage(content="a"), UserMessage(content="b")
    first.attributes["k"] = 1
    assert second.attributes == {}


def test_assistant_message_defaults_describe_an_empty_answer():
    message = AssistantMessage()
    assert message.content == ""
    assert message.reasoning is None
    assert message.tool_calls == ()
    assert message.provider is None
    assert message.model is None


def test_assistant_tool_calls_are_stored_as_a_tuple_in_model_order():
    first, second = ToolCall(id="1", name="a"), ToolCall(id="2", name="b")
    message = AssistantMessage(tool_calls=[first, second])
    assert message.tool_calls == (first, second)
    assert isinstance(message.tool_calls, tuple)


def test_tool_call_arguments_default_to_a_fresh_editable_dict():
    first, second = ToolCall(id="1", name="a"), ToolCall(id="2", name="a")
    first.arguments["path"] = "x"
    assert second.arguments == {}
    first.arguments = {"path": "y"}
    assert first.arguments == {"path": "y"}


def test_tool_messages_succeed_unless_told_otherwise():
    ok = ToolMessage(tool_call_id="c", name="t", content="done")
    failed = ToolMessage(tool_call_id="c", name="t", content="boom", success=False)
    assert ok.success is True
    assert failed.success is False


def test_user_content_may_mix_text_and_images():
    content = [
        TextContent(text="What is this?"),
        ImageContent(source=ImageUrlSource(url="https://example.com/cat.png"), detail="low"),
        ImageContent(source=ImageBytesSource(data=b"\x89PNG", media_type="image/png")),
    ]
    message = UserMessage(content=content)
    assert message.content[0].text == "What is this?"
    assert message.content[1].source.url == "https://example.com/cat.png"
    assert message.content[2].source.data == b"\x89PNG"


def test_image_bytes_must_be_bytes():
    with pytest.raises(TypeError, match="bytes"):
        ImageBytesSource(data="not bytes", media_type="image/png")  # type: ignore[arg-type]


def test_image_bytes_need_a_media_type():
    with pytest.raises(ValueError, match="media_type"):
        ImageBytesSource(data=b"x", media_type="png")
