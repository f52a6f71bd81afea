"""``AttachmentExtension``: messages hold attachment ids, each provider request gets the parts.

A real ``Agent`` keeps the history (``InMemoryMessageAccumulator``); the scripted model
records what a provider would have been sent. The history must never hold the bytes.
"""

from __future__ import annotations

from agent_app.attachments import AttachmentFile, check_attachment, read_attachment_tool
from agent_app.attachments.extension import ATTACHMENTS_ATTRIBUTE, AttachmentExtension
from tests.app.test_attachments_files import image_bytes, pdf_bytes
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import (
    AssistantMessage,
    ImageBytesSource,
    ImageContent,
    TextContent,
    UserMessage,
    content_text,
)
from zett_agent.testing import ScriptedModel


class SeeingModel(ScriptedModel):
    accepts_images = True


class Storage:
    """The app's side: attachments by chat, and every lookup made."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], AttachmentFile] = {}
        self.lookups: list[tuple[str, str]] = []

    def add(self, chat: str, attachment_id: str, data: bytes, name: str) -> None:
        checked = check_attachment(data, name)
        self.files[chat, attachment_id] = AttachmentFile(
            attachment_id, checked.name, checked.media_type, data
        )

    def read(self, chat: str, attachment_id: str) -> AttachmentFile | None:
        self.lookups.append((chat, attachment_id))
        return self.files.get((chat, attachment_id))


def referring(text: str, *ids: str) -> UserMessage:
    return UserMessage(text, attributes={ATTACHMENTS_ATTRIBUTE: list(ids)})


async def agent_for(model, storage: Storage, **options):
    memory = InMemoryMessageAccumulator()
    agent = await Agent.create(
        model, extensions=[memory, AttachmentExtension(storage.read)], **options
    )
    return agent, memory


def sent_user_messages(model: ScriptedModel, index: int) -> list[UserMessage]:
    return [m for m in model.requests[index].messages if isinstance(m, UserMessage)]


async def test_a_referenced_png_reaches_the_model_while_history_keeps_only_the_reference():
    png = image_bytes("PNG", (64, 48))
    storage = Storage()
    storage.add("chat-1", "img-7", png, "shape.png")
    model = SeeingModel([AssistantMessage(content="A red box."), AssistantMessage(content="Red.")])
    agent, memory = await agent_for(model, storage)
    config = AgentRunConfig(session_id="chat-1")

    await agent.run(referring("What is this?", "img-7"), config=config)
    (sent,) = sent_user_messages(model, 0)
    assert sent.content[0] == TextContent("What is this?")
    (image,) = [part for part in sent.content if isinstance(part, ImageContent)]
    assert image.source == ImageBytesSource(png, "image/png")

    stored = [m for m in memory.messages("chat-1") if isinstance(m, UserMessage)]
    assert [m.content for m in stored] == ["What is this?"]
    assert stored[0].attributes[ATTACHMENTS_ATTRIBUTE] == ["img-7"]

    # The next turn's request is built again from the reference: the bytes are read again.
    await agent.run("And its colour?", config=config)
    first, second = sent_user_messages(model, 1)
    assert any(isinstance(part, ImageContent) for part in first.content)
    assert second.content == "And its colour?"
    assert storage.lookups == [("chat-1", "img-7"), ("chat-1", "img-7")]


async def test_the_same_history_goes_to_a_model_that_cannot_see_images_as_a_note():
    storage = Storage()
    storage.add("chat-1", "img-1", image_bytes("JPEG"), "photo.jpg")
    blind = ScriptedModel([AssistantMessage(content="I cannot see it.")])
    agent, _ = await agent_for(SeeingModel(), storage)
    await agent.run(
        referring("Describe", "img-1"), config=AgentRunConfig(session_id="chat-1"), model=blind
    )
    (sent,) = sent_user_messages(blind, 0)
    assert not any(isinstance(part, ImageContent) for part in sent.content)
    assert "photo.jpg" in content_text(sent.content)
    assert "cannot see images" in content_text(sent.content)


async def test_a_referenced_pdf_arrives_as_text_and_points_to_the_tool_when_cut():
    pages = [f"Chapter {number}. " + "lorem " * 200 for number in range(1, 6)]
    storage = Storage()
    storage.add("chat-1", "doc-1", pdf_bytes(pages), "book.pdf")
    model = ScriptedModel([AssistantMessage(content="ok")])
    memory = InMemoryMessageAccumulator()
    agent = await Agent.create(
        model,
        tools=[read_attachment_tool(storage.read)],
        extensions=[memory, AttachmentExtension(storage.read, text_budget=1000)],
    )
    await agent.run(referring("Summarise", "doc-1"), config=AgentRunConfig(session_id="chat-1"))
    text = content_text(sent_user_messages(model, 0)[0].content)
    assert "Chapter 1." in text and "Chapter 3." not in text
    assert 'read_attachment(id="doc-1", start=1000' in text


async def test_an_attachment_the_reader_does_not_find_becomes_a_note_and_the_run_goes_on():
    storage = Storage()
    storage.add("chat-2", "img-9", image_bytes("PNG"), "theirs.png")  # another chat's
    model = SeeingModel([AssistantMessage(content="Nothing attached.")])
    agent, _ = await agent_for(model, storage)
    answer = await agent.run(
        referring("Look", "img-9", "gone"), config=AgentRunConfig(session_id="chat-1")
    )
    assert answer.content == "Nothing attached."
    (sent,) = sent_user_messages(model, 0)
    assert not any(isinstance(part, ImageContent) for part in sent.content)
    assert "img-9 is no longer available" in content_text(sent.content)
    assert "gone is no longer available" in content_text(sent.content)
    assert storage.lookups == [("chat-1", "img-9"), ("chat-1", "gone")]


async def test_a_request_without_references_is_sent_as_it_was():
    storage = Storage()
    model = ScriptedModel([AssistantMessage(content="hi"), AssistantMessage(content="ho")])
    agent, _ = await agent_for(model, storage)
    await agent.run("hello", config=AgentRunConfig(session_id="chat-1"))
    malformed = UserMessage("again", attributes={ATTACHMENTS_ATTRIBUTE: "img-7"})
    await agent.run(malformed, config=AgentRunConfig(session_id="chat-1"))
    assert [m.content for m in sent_user_messages(model, 1)] == ["hello", "again"]
    assert storage.lookups == []


async def test_only_a_user_message_naming_files_makes_a_request_read_them():
    """The check runs over the whole conversation at each call: messages with other
    attributes, or an assistant's ``attachments`` attribute, read nothing; a user message
    far back that names a file still does."""
    storage = Storage()
    storage.add("chat-1", "img-1", image_bytes(), "cat.png")
    model = SeeingModel([AssistantMessage(content=str(n)) for n in range(3)])
    agent, memory = await agent_for(model, storage)
    config = AgentRunConfig(session_id="chat-1")
    await agent.run(UserMessage("tagged", attributes={"source": "api"}), config=config)
    answer = memory.messages("chat-1")[-1]
    answer.attributes[ATTACHMENTS_ATTRIBUTE] = ["img-1"]  # an assistant's: names no file
    await agent.run("plain", config=config)
    assert storage.lookups == []
    await agent.run(referring("look", "img-1"), config=config)
    assert storage.lookups == [("chat-1", "img-1")]
