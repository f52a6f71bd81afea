"""The site under a script prefix (``daphne --root-path /shop``, ``FORCE_SCRIPT_NAME``, a
proxy's sub-path): every URL zett builds carries it — the page's socket and links, the
widget's socket, and the attachment links in a socket's frames."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import set_script_prefix

from tests.app.conftest import RECEIVE_TIMEOUT, Socket, new_browser
from tests.app.llm_doubles import say
from tests.app.test_attachments_files import image_bytes
from tests.app.test_widget_tag import configs, render
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)

PREFIX = "/shop"


def page_config(html: str) -> dict:
    found = re.search(
        r'<script id="chat-config" type="application/json">(.*?)</script>', html, re.S
    )
    assert found
    return json.loads(found.group(1))


@pytest.fixture
def prefixed():
    """The script prefix Django's handlers set for a request under ``/shop`` (its test
    client sets none)."""
    set_script_prefix(f"{PREFIX}/")
    yield
    set_script_prefix("/")


def test_the_chat_page_builds_its_socket_and_links_under_the_prefix(prefixed):
    client = Client()
    session_id = uuid.uuid4()
    html = client.get(f"/s/{session_id}/", SCRIPT_NAME=PREFIX).content.decode()
    config = page_config(html)
    assert config["socketPath"] == f"{PREFIX}/ws/sessions/{session_id}/"
    assert config["listUrl"] == f"{PREFIX}/"
    assert config["attachmentsUrl"].startswith(f"{PREFIX}/s/{session_id}/")
    listing = client.get("/", SCRIPT_NAME=PREFIX).content.decode()
    assert f'href="{PREFIX}/s/' in listing


def test_the_widget_opens_its_socket_under_the_prefix(prefixed):
    (config,) = configs(render("{% zett_chat %}"))
    assert config["socketPrefix"] == f"{PREFIX}/ws/sessions/"
    assert config["attachmentsUrl"].startswith(f"{PREFIX}/s/")


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)


async def test_a_socket_under_a_root_path_gives_attachment_links_under_it(
    media, prefixed, use_model
):
    from zett_site.asgi import application

    use_model(ScriptedModel([say("Seen.")]))
    cookie, _ = await new_browser()
    session_id = str(uuid.uuid4())
    client = Client()
    client.cookies["sessionid"] = cookie.split("=", 1)[1]
    upload = await sync_to_async(client.post)(
        f"/s/{session_id}/attachments/",
        {"file": SimpleUploadedFile("a.png", image_bytes("PNG"))},
        SCRIPT_NAME=PREFIX,
    )
    ref = upload.json()
    assert ref["url"].startswith(f"{PREFIX}/s/{session_id}/attachments/")
    set_script_prefix("/")  # the socket's prefix comes from its own scope

    async def connect() -> Socket:
        communicator = WebsocketCommunicator(
            application,
            f"{PREFIX}/ws/sessions/{session_id}/",
            headers=[(b"origin", b"http://testserver"), (b"cookie", cookie.encode())],
        )
        communicator.scope["root_path"] = PREFIX  # as daphne --root-path sets it
        socket = Socket(communicator, session_id)
        connected, _ = await communicator.connect(timeout=RECEIVE_TIMEOUT)
        assert connected
        socket.session_frame = await socket.expect("session", session_id=session_id)
        return socket

    socket = await connect()
    try:
        await socket.send({"type": "user_message", "content": "Look", "attachments": [ref["id"]]})
        started = await socket.expect("run_started")
        assert started["attachments"] == [ref]
        await socket.run_to_completion()
    finally:
        await socket.communicator.disconnect()
    again = await connect()
    try:
        (item, _) = again.session_frame["history"]
        assert item["attachments"] == [ref]
    finally:
        await again.communicator.disconnect()
