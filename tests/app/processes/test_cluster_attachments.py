"""Attachments across two real daphne workers on PostgreSQL and Redis.

A file uploaded through worker one (HTTP, with the browser's cookie and CSRF token) is sent
by id on a socket of worker two, whose run reads its bytes from the shared storage (one
``MEDIA_ROOT``, as a shared bucket would be); worker one's sockets see the run with the
file's reference, and a reload on either worker shows it in the history.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie

import pytest

from tests.app.servers import DaphneProcess, two_workers
from tests.app.test_attachments_files import image_bytes, pdf_bytes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
async def workers(tmp_path) -> AsyncIterator[tuple[DaphneProcess, DaphneProcess]]:
    async with two_workers(
        "attach",
        tmp_path,
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0",
        DJANGO_MEDIA_ROOT=str(tmp_path / "shared-media"),
    ) as (one, two, _):
        yield one, two


def _upload(worker: DaphneProcess, session_id: str, data: bytes, name: str) -> dict:
    """Upload as the page does: the chat page's CSRF cookie, then the multipart POST."""
    base = f"http://127.0.0.1:{worker.port}"
    assert worker.cookie is not None
    page = urllib.request.urlopen(
        urllib.request.Request(f"{base}/s/{session_id}/", headers={"Cookie": worker.cookie}),
        timeout=60,
    )
    cookies = SimpleCookie()
    for header in page.headers.get_all("Set-Cookie") or ():
        cookies.load(header)
    token = cookies["csrftoken"].value
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{base}/s/{session_id}/attachments/",
        data=body,
        method="POST",
        headers={
            "Cookie": f"{worker.cookie}; csrftoken={token}",
            "X-CSRFToken": token,
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 201
        return json.loads(response.read())


async def upload(worker: DaphneProcess, session_id: str, data: bytes, name: str) -> dict:
    return await asyncio.to_thread(_upload, worker, session_id, data, name)


def completed(frame: dict) -> bool:
    return (frame.get("event") or {}).get("type") == "run_completed" or frame["type"] in (
        "run_failed",
        "error",
    )


async def test_an_upload_on_one_worker_is_read_by_a_run_on_the_other(workers):
    one, two = workers
    session_id = str(uuid.uuid4())
    png = image_bytes("PNG", (48, 32))
    image = await upload(one, session_id, png, "chart.png")
    document = await upload(one, session_id, pdf_bytes(["Revenue rose in March"]), "q1.pdf")
    watcher = await one.socket(session_id)
    sender = await two.socket(session_id)

    await sender.send(
        {
            "type": "user_message",
            "content": "What did I attach?",
            "attachments": [image["id"], document["id"]],
        }
    )
    frames = await sender.until(completed)
    assert (frames[-1].get("event") or {}).get("type") == "run_completed", frames[-1]
    answer = frames[-1]["event"]["message"]["content"]
    assert "You attached 2 files" in answer
    assert f"{len(png)} bytes of image data" in answer  # worker two read the stored bytes
    assert "Revenue rose in March" in answer

    seen = await watcher.until(lambda frame: frame["type"] == "run_started")
    assert seen[-1]["attachments"] == [image, document]
    await watcher.until(completed)

    for worker in (one, two):
        again = await worker.socket(session_id)
        (message, _) = again.session_frame["history"]
        assert message["attachments"] == [image, document]
        await again.close()


async def test_an_id_of_another_browsers_chat_is_refused_on_either_worker(workers):
    one, two = workers
    theirs = await upload(one, str(uuid.uuid4()), image_bytes("PNG"), "private.png")
    stranger = await two.socket(str(uuid.uuid4()), cookie=two.browser_cookie())
    await stranger.send({"type": "user_message", "content": "show", "attachments": [theirs["id"]]})
    error = await stranger.expect("error")
    assert error["code"] == "bad_frame"
    assert theirs["id"] in error["message"]
