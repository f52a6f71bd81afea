"""Image and document parts of an AG-UI user message become the chat's attachments, through
the real endpoint: the same checks and quotas as an upload, refusals that name the part,
and the model sent the files as a socket's ``user_message`` with attachments would."""

from __future__ import annotations

import base64
import uuid

import pytest
from django.test import override_settings

from agent_app.models import ChatAttachment
from tests.app.agui_support import (
    http_fixture,  # noqa: F401 (the ``http`` fixture)
    make_token,
    post_run,
    run_input,
)
from tests.app.asgi_http import SseReader
from tests.app.llm_doubles import say
from tests.app.test_attachments_chat import SeeingModel, user_messages
from tests.app.test_attachments_files import image_bytes, pdf_bytes
from zett_agent.messages import ImageBytesSource, ImageContent, TextContent, content_text

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


def data_part(kind: str, data: bytes, mime: str, name: str | None = None) -> dict:
    part = {
        "type": kind,
        "source": {"type": "data", "value": base64.b64encode(data).decode(), "mimeType": mime},
    }
    if name is not None:
        part["metadata"] = {"filename": name}
    return part


def with_parts(thread_id: str, *parts: dict, text: str = "What is this?") -> dict:
    body = run_input(thread_id, text)
    body["messages"][-1]["content"] = [{"type": "text", "text": text}, *parts]
    return body


async def test_an_image_and_a_pdf_reach_the_model_as_attachments(http, use_model):
    model = use_model(SeeingModel([say("A red box and a note on tea.")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    png = image_bytes("PNG", (40, 30))
    pdf = pdf_bytes(["Green tea grows in Shizuoka"])
    body = with_parts(
        thread_id,
        data_part("image", png, "image/png", "box.png"),
        data_part("document", pdf, "application/pdf", "tea.pdf"),
    )
    call = await post_run(http, secret, body)
    assert call.status == 200
    events = await SseReader(call).rest()
    assert events[-1].data["outcome"] == {"type": "success"}
    rows = [row async for row in ChatAttachment.objects.filter(session_id=thread_id)]
    assert sorted((row.name, row.media_type) for row in rows) == [
        ("box.png", "image/png"),
        ("tea.pdf", "application/pdf"),
    ]
    (sent,) = user_messages(model, 0)
    assert sent.content[0] == TextContent("What is this?")
    (image,) = [part for part in sent.content if isinstance(part, ImageContent)]
    assert image.source == ImageBytesSource(png, "image/png")
    assert "Green tea grows in Shizuoka" in content_text(sent.content)


async def test_a_file_uploaded_before_is_given_by_its_id(http, use_model):
    from asgiref.sync import sync_to_async

    model = use_model(SeeingModel([say("Seen.")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    first = await post_run(
        http, secret, with_parts(thread_id, data_part("image", image_bytes(), "image/png"))
    )
    await SseReader(first).rest()
    row = await ChatAttachment.objects.aget(session_id=thread_id)
    again = with_parts(
        thread_id, {"type": "image", "source": {"type": "file", "value": str(row.pk)}}
    )
    await SseReader(await post_run(http, secret, again)).rest()
    assert await sync_to_async(ChatAttachment.objects.filter(session_id=thread_id).count)() == 1
    (image,) = [p for p in user_messages(model, 1)[-1].content if isinstance(p, ImageContent)]
    assert image.source.data == image_bytes()


@pytest.mark.parametrize(
    ("part", "status", "code", "says"),
    [
        (
            data_part("image", b"not an image at all", "image/png", "fake.png"),
            400,
            "attachment_refused",
            "content[1]",
        ),
        (
            {"type": "image", "source": {"type": "data", "value": "@@@", "mimeType": "image/png"}},
            400,
            "bad_input",
            "not base64",
        ),
        (
            {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}},
            400,
            "unsupported_content",
            "not fetched",
        ),
        (
            {"type": "audio", "source": {"type": "data", "value": "AA==", "mimeType": "audio/wav"}},
            400,
            "unsupported_content",
            "'audio'",
        ),
        (
            {"type": "image", "source": {"type": "file", "value": str(uuid.uuid4())}},
            400,
            "bad_input",
            "no attachment",
        ),
    ],
)
async def test_a_file_refused_is_a_clear_error_and_nothing_is_stored(
    http, use_model, part, status, code, says
):
    use_model(SeeingModel([say("never")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    refused = await post_run(http, secret, with_parts(thread_id, part))
    assert refused.status == status
    error = await refused.json()
    assert error["code"] == code and says in error["message"], error
    assert not await ChatAttachment.objects.filter(session_id=thread_id).aexists()


async def test_the_daily_quota_of_uploads_applies(http, use_model):
    use_model(SeeingModel([say("never")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    with override_settings(ZETT_ATTACHMENT_DAILY_FILES=0):
        refused = await post_run(
            http, secret, with_parts(thread_id, data_part("image", image_bytes(), "image/png"))
        )
    assert refused.status == 400
    error = await refused.json()
    assert (error["code"], error["reason"]) == ("attachment_refused", "quota_exceeded")
