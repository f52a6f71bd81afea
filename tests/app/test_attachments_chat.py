"""Attachments through the whole app: uploaded over HTTP, sent by id on the socket, read by
the model when its request is built, shown by reference in every frame.

The files are real (Pillow's PNGs, hand-made PDFs) and stored in a real
``FileSystemStorage``; the only double is the scripted model, which records what a
provider would have been sent.
"""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from agent_app.durable.history import SESSION_FRAME_BUDGET
from agent_app.models import ChatAttachment, ChatMessage
from tests.app.conftest import new_browser
from tests.app.llm_doubles import call_tool, say
from tests.app.test_attachments_files import image_bytes, pdf_bytes
from zett_agent.messages import (
    ImageBytesSource,
    ImageContent,
    TextContent,
    ToolMessage,
    UserMessage,
    content_text,
)
from zett_agent.providers.demo import DemoModel
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


class SeeingModel(ScriptedModel):
    accepts_images = True


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


class Browser:
    """One anonymous visitor: an HTTP client and sockets with the same session cookie."""

    def __init__(self, cookie: str, sockets) -> None:
        self.cookie = cookie
        self.client = Client()
        self.client.cookies["sessionid"] = cookie.split("=", 1)[1]
        self._sockets = sockets

    async def upload(self, session_id: str, data: bytes, name: str) -> dict:
        url = reverse("agent_app:attachment_upload", kwargs={"session_id": session_id})
        post = sync_to_async(self.client.post)
        response = await post(url, {"file": SimpleUploadedFile(name, data)})
        assert response.status_code == 201, response.content
        return response.json()

    async def socket(self, session_id: str | None = None):
        return await self._sockets(session_id, cookie=self.cookie)


@pytest.fixture
def browser(sockets):
    async def make() -> Browser:
        cookie, _ = await new_browser()
        return Browser(cookie, sockets)

    return make


def user_messages(model: ScriptedModel, index: int) -> list[UserMessage]:
    return [m for m in model.requests[index].messages if isinstance(m, UserMessage)]


async def test_a_png_reaches_the_model_as_an_image_part_with_its_bytes(browser, use_model):
    model = use_model(SeeingModel([say("A red box.")]))
    visitor = await browser()
    session_id = str(uuid.uuid4())
    png = image_bytes("PNG", (64, 48))
    ref = await visitor.upload(session_id, png, "box.png")
    socket = await visitor.socket(session_id)

    await socket.send(
        {"type": "user_message", "content": "What is this?", "attachments": [ref["id"]]}
    )
    started = await socket.expect("run_started")
    await socket.run_to_completion()

    assert started["attachments"] == [ref]
    (sent,) = user_messages(model, 0)
    assert sent.content[0] == TextContent("What is this?")
    (image,) = [part for part in sent.content if isinstance(part, ImageContent)]
    assert image.source == ImageBytesSource(png, "image/png")
    row = await ChatMessage.objects.aget(session_id=session_id, role="user")
    assert row.content == "What is this?"  # the stored message holds the reference only
    assert row.extra["attributes"] == {"attachments": [ref["id"]]}
    assert "base64" not in json.dumps(row.extra)


async def test_a_pdfs_text_reaches_the_model(browser, use_model):
    model = use_model(SeeingModel([say("It is about tea.")]))
    visitor = await browser()
    session_id = str(uuid.uuid4())
    ref = await visitor.upload(session_id, pdf_bytes(["Green tea grows in Shizuoka"]), "tea.pdf")
    socket = await visitor.socket(session_id)

    await socket.send({"type": "user_message", "content": "Summarise", "attachments": [ref["id"]]})
    await socket.run_to_completion()

    text = content_text(user_messages(model, 0)[0].content)
    assert "Green tea grows in Shizuoka" in text
    assert "tea.pdf" in text


async def test_a_long_document_is_cut_and_read_on_with_the_tool(browser, use_model):
    document = "".join(f"line {index:05d}\n" for index in range(3000))  # 33 000 characters
    visitor = await browser()
    session_id = str(uuid.uuid4())
    ref = await visitor.upload(session_id, document.encode(), "log.txt")
    reading = call_tool("read_attachment", id=ref["id"], start=20000, length=100)
    model = use_model(SeeingModel([reading, say("Done.")]))
    socket = await visitor.socket(session_id)

    await socket.send({"type": "user_message", "content": "Read it", "attachments": [ref["id"]]})
    await socket.run_to_completion()

    first = content_text(user_messages(model, 0)[0].content)
    assert "line 00000" in first and "line 02999" not in first
    assert f'read_attachment(id="{ref["id"]}", start=20000' in first
    assert "read_attachment" in {tool.name for tool in model.requests[0].tools}
    result = next(m for m in model.requests[1].messages if isinstance(m, ToolMessage))
    assert result.success and document[20000:20100] in content_text(result.content)


async def test_chats_without_documents_are_not_offered_the_reading_tool(browser, use_model):
    model = use_model(SeeingModel([say("Hi.")]))
    visitor = await browser()
    socket = await visitor.socket()
    await socket.send({"type": "user_message", "content": "Hello"})
    await socket.run_to_completion()
    assert "read_attachment" not in {tool.name for tool in model.requests[0].tools}


async def test_a_run_reads_whether_its_chat_holds_a_document_with_the_chat(
    browser, use_model, monkeypatch
):
    """Read with the chat's row as the run is stored (``entry_returning``); the reading
    tool's offer asks no query of its own."""
    import agent_app.agents.factory

    asked = []
    monkeypatch.setattr(agent_app.agents.factory, "has_documents", asked.append)
    model = use_model(SeeingModel([say("Hi."), say("Again.")]))
    visitor = await browser()
    session_id = str(uuid.uuid4())
    ref = await visitor.upload(session_id, b"notes", "notes.txt")
    socket = await visitor.socket(session_id)
    for _ in range(2):
        await socket.send({"type": "user_message", "content": "Hi", "attachments": [ref["id"]]})
        await socket.run_to_completion()
    assert [("read_attachment" in {tool.name for tool in r.tools}) for r in model.requests] == [
        True,
        True,
    ]
    assert asked == []


async def test_another_persons_attachment_id_is_refused_and_nothing_runs(browser, use_model):
    model = use_model(SeeingModel([say("Never.")]))
    owner, stranger = await browser(), await browser()
    theirs = await owner.upload(str(uuid.uuid4()), image_bytes("PNG"), "private.png")
    socket = await stranger.socket()

    await socket.send({"type": "user_message", "content": "Show me", "attachments": [theirs["id"]]})
    error = await socket.expect_error("bad_frame")
    assert theirs["id"] in error["message"]
    await socket.send({"type": "user_message", "content": "Show me", "attachments": ["not-an-id"]})
    await socket.expect_error("bad_frame")
    await socket.assert_quiet()
    assert model.requests == []
    assert not await ChatMessage.objects.filter(session_id=socket.session_id).aexists()


async def test_the_same_persons_attachment_of_another_chat_is_refused(browser, use_model):
    use_model(SeeingModel([say("Never.")]))
    visitor = await browser()
    elsewhere = await visitor.upload(str(uuid.uuid4()), image_bytes("PNG"), "a.png")
    socket = await visitor.socket()
    await socket.send({"type": "user_message", "content": "Hi", "attachments": [elsewhere["id"]]})
    await socket.expect_error("bad_frame")


async def test_history_replay_and_other_tabs_carry_references(browser, use_model):
    use_model(SeeingModel([say("Nice."), say("Again.")]))
    visitor = await browser()
    session_id = str(uuid.uuid4())
    ref = await visitor.upload(session_id, image_bytes("PNG"), "one.png")
    first, second = await visitor.socket(session_id), await visitor.socket(session_id)

    await first.send({"type": "user_message", "content": "Look", "attachments": [ref["id"]]})
    seen = await second.expect("run_started")
    assert seen["attachments"] == [ref]
    await first.run_to_completion()
    await second.run_to_completion()

    again = await visitor.socket(session_id)
    (item, _) = again.session_frame["history"]
    assert item["attachments"] == [ref]
    assert set(ref) == {"id", "name", "media_type", "size", "url"}


async def test_regenerate_and_edit_keep_the_messages_files(browser, use_model):
    model = use_model(SeeingModel([say("One."), say("Two."), say("Three.")]))
    visitor = await browser()
    session_id = str(uuid.uuid4())
    png = image_bytes("PNG", (5, 5))
    ref = await visitor.upload(session_id, png, "dot.png")
    socket = await visitor.socket(session_id)
    await socket.send({"type": "user_message", "content": "What?", "attachments": [ref["id"]]})
    await socket.run_to_completion()

    await socket.send({"type": "regenerate"})
    assert (await socket.expect("run_started"))["attachments"] == [ref]
    await socket.run_to_completion()
    await socket.send({"type": "edit_last", "content": "And now?"})
    assert (await socket.expect("run_started"))["attachments"] == [ref]
    await socket.run_to_completion()

    for index in (1, 2):
        (sent,) = user_messages(model, index)
        assert [p.source.data for p in sent.content if isinstance(p, ImageContent)] == [png]


async def test_the_history_frame_of_a_chat_with_50_images_stays_small(browser, use_model):
    use_model(SeeingModel([say(f"Image {index}.") for index in range(50)]))
    visitor = await browser()
    session_id = str(uuid.uuid4())
    # Noise does not compress: each PNG is about 120 KB, 6 MB in all.
    noisy = [image_bytes("PNG", (200, 200), (index, 90, 200)) for index in range(50)]
    socket = await visitor.socket(session_id)
    for index, data in enumerate(noisy):
        ref = await visitor.upload(session_id, data, f"shot {index}.png")
        await socket.send(
            {"type": "user_message", "content": f"#{index}", "attachments": [ref["id"]]}
        )
        await socket.run_to_completion()

    again = await visitor.socket(session_id)
    size = len(json.dumps(again.session_frame))
    assert size < SESSION_FRAME_BUDGET + 8 * 1024
    history = again.session_frame["history"]
    with_files = [item for item in history if item.get("attachments")]
    assert with_files and all(item["attachments"][0]["url"] for item in with_files)
    await again.send({"type": "history_before", "position": history[0]["position"], "limit": 100})
    page = await again.expect("history_page")
    assert len(json.dumps(page)) < 100 * 1024
    assert await ChatAttachment.objects.filter(session_id=session_id).acount() == 50


async def test_the_demo_model_says_what_it_was_given(browser, use_model):
    use_model(DemoModel())
    visitor = await browser()
    session_id = str(uuid.uuid4())
    image = await visitor.upload(session_id, image_bytes("PNG", (20, 20)), "pic.png")
    document = await visitor.upload(session_id, b"Alpha beta gamma delta", "words.txt")
    socket = await visitor.socket(session_id)

    await socket.send(
        {"type": "user_message", "content": "Hi", "attachments": [image["id"], document["id"]]}
    )
    answer = (await socket.run_to_completion())[-1]["event"]["message"]["content"]

    assert "You attached 2 files" in answer
    assert "**pic.png**: an image (image/png)" in answer
    assert "“Alpha beta gamma delta…”" in answer
