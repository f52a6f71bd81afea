"""Attachments on their way to a model: real files through a real zett_agent ``Agent``.

The only double is the model (``ScriptedModel``): what it records in ``.requests`` is what a
provider adapter would have been given.
"""

from __future__ import annotations

import asyncio

import pytest

from agent_app.attachments import (
    AttachmentFile,
    accepts_images,
    attachment_parts,
    check_attachment,
    read_attachment_tool,
    user_message_with_attachments,
)
from agent_app.attachments.text import document_text
from tests.app.test_attachments_files import image_bytes, pdf_bytes
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.messages import (
    AssistantMessage,
    ImageBytesSource,
    ImageContent,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
    content_text,
)
from zett_agent.testing import ScriptedModel


class SeeingModel(ScriptedModel):
    """A scripted model that says it takes images, as the provider adapters do."""

    accepts_images = True


def stored(data: bytes, name: str, attachment_id: str = "a1") -> AttachmentFile:
    """What the app reads back from storage for an upload that passed the checks."""
    checked = check_attachment(data, name)
    return AttachmentFile(attachment_id, checked.name, checked.media_type, data)


def user_turn(model: ScriptedModel, request_index: int = 0) -> UserMessage:
    messages = model.requests[request_index].messages
    return next(message for message in messages if isinstance(message, UserMessage))


async def run(model: ScriptedModel, message: UserMessage, tools=()) -> AssistantMessage:
    agent = await Agent.create(model, tools=tools)
    return await agent.run(message, config=AgentRunConfig(session_id="chat-1"))


async def test_a_png_reaches_a_model_that_sees_images_as_an_image_part_with_its_bytes():
    png = image_bytes("PNG", (48, 32))
    model = SeeingModel([AssistantMessage(content="A red rectangle.")])
    message = user_message_with_attachments(
        "What is this?", [stored(png, "shape.png", "img-7")], model=model
    )
    answer = await run(model, message)
    assert answer.content == "A red rectangle."
    sent = user_turn(model).content
    assert isinstance(sent, list)
    assert sent[0] == TextContent("What is this?")
    images = [part for part in sent if isinstance(part, ImageContent)]
    assert len(images) == 1
    assert images[0].source == ImageBytesSource(png, "image/png")
    assert images[0].source.data == png
    assert "shape.png" in content_text(sent) and "img-7" in content_text(sent)


async def test_a_jpeg_keeps_its_own_media_type():
    jpeg = image_bytes("JPEG", (20, 20))
    model = SeeingModel([AssistantMessage(content="ok")])
    await run(model, user_message_with_attachments("hi", [stored(jpeg, "p.jpg")], model=model))
    (image,) = [part for part in user_turn(model).content if isinstance(part, ImageContent)]
    assert image.source == ImageBytesSource(jpeg, "image/jpeg")


async def test_a_model_that_does_not_see_images_gets_a_note_instead():
    model = ScriptedModel([AssistantMessage(content="I cannot see it.")])
    message = user_message_with_attachments(
        "Look", [stored(image_bytes("PNG"), "cat.png")], model=model
    )
    await run(model, message)
    sent = user_turn(model).content
    assert not any(isinstance(part, ImageContent) for part in sent)
    assert "cat.png" in content_text(sent)
    assert "cannot see images" in content_text(sent)


def test_only_a_literal_true_means_a_model_takes_images():
    class Truthy:
        accepts_images = "yes"

    assert accepts_images(SeeingModel()) is True
    assert accepts_images(ScriptedModel()) is False
    assert accepts_images(Truthy()) is False


async def test_a_pdfs_text_reaches_the_model():
    pdf = pdf_bytes(["Quarterly revenue rose 12 percent.", "Costs fell in March."])
    model = SeeingModel([AssistantMessage(content="Revenue rose.")])
    message = user_message_with_attachments(
        "Summarise", [stored(pdf, "q3 report.pdf", "doc-1")], model=model
    )
    await run(model, message)
    sent = user_turn(model).content
    assert not any(isinstance(part, ImageContent) for part in sent)
    text = content_text(sent)
    assert "Quarterly revenue rose 12 percent." in text
    assert "Costs fell in March." in text
    assert text.index("[page 1]") < text.index("[page 2]")
    assert "q3 report.pdf" in text and "doc-1" in text


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("notes.txt", "remember the milk"),
        ("README.md", "# Heading\n\n- item"),
        ("sales.csv", "month,total\nMarch,12\n"),
        ("config.json", '{"retries": 3}'),
    ],
)
async def test_text_files_reach_the_model_whole(name, body):
    model = ScriptedModel([AssistantMessage(content="ok")])
    await run(model, user_message_with_attachments("", [stored(body.encode(), name)], model=model))
    text = content_text(user_turn(model).content)
    assert body in text
    assert "Cut" not in text


def test_a_pdf_without_a_text_layer_says_so():
    pdf = pdf_bytes([""])
    (part,) = attachment_parts(stored(pdf, "scan.pdf"), images=True)
    assert "no text that could be read" in part.text


def test_a_long_document_is_cut_to_the_budget_with_a_note_of_what_was_cut():
    body = "".join(f"line {number:05d}\n" for number in range(1000))  # 11 000 characters
    attachment = stored(body.encode(), "log.txt", "log-9")
    (part,) = attachment_parts(attachment, images=False, text_budget=2000)
    assert body[:2000] in part.text
    assert body[2000:2100] not in part.text
    assert "has 11000 characters" in part.text and "first 2000 characters" in part.text
    assert "The rest is not shown" in part.text
    (with_tool,) = attachment_parts(attachment, images=False, text_budget=2000, read_tool=True)
    assert 'read_attachment(id="log-9", start=2000' in with_tool.text


def test_a_long_pdf_is_read_only_as_far_as_the_budget_needs():
    pages = [f"Page {number} says " + "word " * 100 for number in range(1, 41)]
    pdf = stored(pdf_bytes(pages), "book.pdf", "book-1")
    (part,) = attachment_parts(pdf, images=False, text_budget=1500, read_tool=True)
    assert "Page 1 says" in part.text and "Page 3 says" in part.text
    assert "Page 5 says" not in part.text
    assert "book.pdf is longer (40 pages)" in part.text
    assert 'read_attachment(id="book-1", start=1500' in part.text
    beginning = document_text(pdf.data, "application/pdf", at_least=1500)
    assert not beginning.complete and beginning.pages == 40
    assert beginning.text.count("[page ") < 40
    whole = document_text(pdf.data, "application/pdf")
    assert whole.complete and whole.text.count("[page ") == 40
    assert whole.text.startswith(beginning.text)


async def test_the_tool_reads_a_long_pdf_to_its_end_slice_by_slice():
    pages = [f"Page {number} says " + "word " * 100 for number in range(1, 11)]
    pdf = stored(pdf_bytes(pages), "book.pdf", "book-1")
    whole = document_text(pdf.data, "application/pdf").text
    agent_tool = read_attachment_tool(
        lambda session, key: {"book-1": pdf}.get(key), max_length=2000
    )
    read, start = "", 0
    while True:
        result = await invoke(agent_tool, id="book-1", start=start, length=2000)
        assert result.success
        header, _, rest = result.content.partition("\n")
        chunk, _, more = rest.partition("\n[More follows: continue with start=")
        read += chunk
        if not more:
            assert header.endswith(f"of {len(whole)}]")
            break
        start = int(more.rstrip("]"))
    assert read == whole


async def test_a_stored_pdf_that_no_longer_opens_is_a_note_not_a_failed_run():
    broken = AttachmentFile("d1", "old.pdf", "application/pdf", b"%PDF-1.4\nnot really\n")
    model = ScriptedModel([AssistantMessage(content="It is unreadable.")])
    answer = await run(model, user_message_with_attachments("Read", [broken], model=model))
    assert answer.content == "It is unreadable."
    text = content_text(user_turn(model).content)
    assert "old.pdf" in text and "could not be read" in text and "damaged PDF" in text
    result = await invoke(read_attachment_tool(lambda session, key: broken), id="d1")
    assert not result.success and "could not be read" in result.content


def test_with_no_attachments_the_message_is_the_plain_text():
    assert user_message_with_attachments("hello", [], model=SeeingModel()) == UserMessage("hello")


async def test_the_model_reads_the_rest_of_a_cut_document_with_the_tool():
    body = "".join(f"row {number:04d};" for number in range(600))  # 5 400 characters
    attachment = stored(body.encode(), "rows.csv", "csv-3")
    lookups: list[str] = []

    def reader(session_id: str, attachment_id: str) -> AttachmentFile | None:
        lookups.append((session_id, attachment_id))
        return attachment if attachment_id == "csv-3" else None

    call = ToolCall("c1", "read_attachment", {"id": "csv-3", "start": 1000, "length": 500})
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), AssistantMessage(content="Done")])
    message = user_message_with_attachments(
        "Count rows", [attachment], model=model, text_budget=1000, read_tool=True
    )
    answer = await run(model, message, tools=[read_attachment_tool(reader, max_length=1000)])
    assert answer.content == "Done"
    assert lookups == [("chat-1", "csv-3")]
    assert [d.name for d in model.requests[0].tools] == ["read_attachment"]
    (result,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert result.success
    assert body[1000:1500] in result.content
    assert body[1500:1510] not in result.content
    assert "characters 1000 to 1500 of 5400" in result.content
    assert "More follows: continue with start=1500" in result.content


async def invoke(agent_tool, **arguments):
    """Run the tool as an agent would, inside a run of session ``chat-1``."""
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall("c1", agent_tool.name, arguments),)),
            AssistantMessage(content="done"),
        ]
    )
    await run(model, UserMessage("go"), tools=[agent_tool])
    (result,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    return result


async def test_the_tool_reads_a_pdf_through_an_async_reader():
    attachment = stored(pdf_bytes(["alpha beta gamma"]), "a.pdf", "p1")

    async def reader(session_id: str, attachment_id: str) -> AttachmentFile | None:
        await asyncio.sleep(0)
        return attachment if (session_id, attachment_id) == ("chat-1", "p1") else None

    result = await invoke(read_attachment_tool(reader), id="p1")
    assert result.success
    assert "alpha beta gamma" in result.content
    assert "follow" not in result.content


async def test_the_tool_refuses_an_id_the_reader_does_not_know():
    result = await invoke(
        read_attachment_tool(lambda session_id, attachment_id: None), id="someone-elses"
    )
    assert not result.success
    assert "someone-elses" in result.content and result.content.startswith("No file")


async def test_the_tool_refuses_to_read_an_image_or_past_the_end():
    image = stored(image_bytes("PNG"), "i.png", "i1")
    text = stored(b"short", "s.txt", "t1")
    files = {"i1": image, "t1": text}
    agent_tool = read_attachment_tool(lambda session_id, attachment_id: files.get(attachment_id))
    result = await invoke(agent_tool, id="i1")
    assert not result.success and "image" in result.content
    result = await invoke(agent_tool, id="t1", start=5)
    assert (
        not result.success and "past the end" in result.content and "5 characters" in result.content
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"id": "", "start": 0},
        {"id": "t1", "start": -1},
        {"id": "t1", "length": 0},
        {"id": "t1", "length": 101},
        {"id": "t1", "extra": True},
        {"start": 0},
        {"id": "x" * 201},
    ],
)
async def test_the_tools_arguments_are_validated_before_the_reader_runs(arguments):
    looked_up: list[str] = []
    agent_tool = read_attachment_tool(lambda *key: looked_up.append(key), max_length=100)
    with pytest.raises(ValueError, match="Invalid arguments for tool 'read_attachment'"):
        await agent_tool.invoke(arguments)
    assert looked_up == []
    assert agent_tool.parameters["properties"]["length"]["maximum"] == 100


def test_the_tool_factory_refuses_a_bad_reader_or_length():
    with pytest.raises(TypeError):
        read_attachment_tool("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        read_attachment_tool(lambda attachment_id: None, max_length=0)
