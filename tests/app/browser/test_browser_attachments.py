"""Attachments in a real Chromium: pick and paste files, see their chips, send, reload, see
the image; a refused file keeps its chip with the reason; axe-core finds nothing serious,
at 1280 px and 375 px, light and dark.

The server is a daphne process on the demo model (which says what it was given), storing
files in a folder of this test.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    EVERY_LAYOUT,
    LiveServer,
    PageProbe,
    axe_violations,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    serve,
)
from tests.app.test_attachments_files import image_bytes

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

PASTE = """([data, name]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, { type: "image/png" }));
  const box = document.getElementById("composer-input");
  box.focus();
  const paste = { clipboardData: transfer, bubbles: true, cancelable: true };
  box.dispatchEvent(new ClipboardEvent("paste", paste));
}"""


@pytest.fixture(scope="module")
def media_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Path]]:
    work = tmp_path_factory.mktemp("attachments")
    media = work / "media"
    with serve(work, "attachments", "demo", {"DJANGO_MEDIA_ROOT": str(media)}) as server:
        yield server, media


def pick(page: Page, name: str, data: bytes, mime: str = "image/png") -> None:
    page.locator("input.attachments__picker").set_input_files(
        {"name": name, "mimeType": mime, "buffer": data}
    )


def chip(page: Page, name: str):
    return page.locator(".attachment--chip", has_text=name)


def test_pick_and_paste_send_reload_and_see_the_images(
    page: Page, media_server: tuple[LiveServer, Path]
) -> None:
    server, media = media_server
    session_id = open_new_chat(page, server)
    expect(page.get_by_role("button", name="Attach files")).to_be_visible()

    pick(page, "picked.png", image_bytes("PNG", (60, 40), (10, 120, 200)))
    expect(chip(page, "picked.png")).to_have_attribute("data-state", "ready")
    expect(chip(page, "picked.png").locator("img")).to_be_visible()
    page.evaluate(PASTE, [base64.b64encode(image_bytes("PNG", (30, 30))).decode(), "pasted.png"])
    expect(chip(page, "pasted.png")).to_have_attribute("data-state", "ready")

    send(page, "What are these?")
    expect(last_answer(page)).to_contain_text("You attached 2 files")
    expect_idle(page)
    expect(page.locator(".attachment--chip")).to_have_count(0)  # sent: the tray is empty
    bubble = page.locator(".msg--user").last
    expect(bubble.locator("img.attachment__thumb")).to_have_count(2)
    assert len(list((media / "zett-attachments" / session_id).iterdir())) == 2

    page.reload()
    bubble = page.locator(".msg--user").last
    images = bubble.locator("img.attachment__thumb")
    expect(images).to_have_count(2)
    expect(images.first).to_have_attribute("alt", "picked.png")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.msg--user img.attachment__thumb')]"
        ".every((image) => image.complete && image.naturalWidth > 0)"
    )
    widths = images.evaluate_all("(all) => all.map((image) => image.naturalWidth)")
    assert widths == [60, 30]  # served by the app's download view, to this browser only

    # Regenerate: the message is answered again and keeps its files.
    page.get_by_role("button", name="Regenerate").click()
    expect(last_answer(page)).to_contain_text("You attached 2 files")
    expect_idle(page)
    expect(page.locator(".msg--user")).to_have_count(1)
    expect(page.locator(".msg--user img.attachment__thumb")).to_have_count(2)


@EVERY_LAYOUT
def test_a_refused_file_keeps_its_chip_with_the_reason_and_can_be_removed(
    page: Page, probe: PageProbe, media_server: tuple[LiveServer, Path]
) -> None:
    server, _ = media_server
    open_new_chat(page, server)
    pick(page, "cat.png", b"<!doctype html><html><script>alert(1)</script></html>", "image/png")
    refused = chip(page, "cat.png")
    expect(refused).to_have_attribute("data-state", "refused")
    expect(refused.locator(".attachment__status")).to_contain_text("cat.png")
    expect(refused.locator("img")).to_have_count(0)  # no broken preview of a non-image

    pick(page, "fine.png", image_bytes("PNG"))
    expect(chip(page, "fine.png")).to_have_attribute("data-state", "ready")
    violations = axe_violations(page)
    assert violations == [], violations

    send(page, "Only the good one")
    expect(last_answer(page)).to_contain_text("You attached one file")
    expect_idle(page)
    expect(refused).to_be_visible()  # still there, with its reason, until removed
    page.get_by_role("button", name="Remove cat.png").click()
    expect(page.locator(".attachment--chip")).to_have_count(0)
    expect(page.locator(".msg--user").last.locator("img.attachment__thumb")).to_have_count(1)
    violations = axe_violations(page)
    assert violations == [], violations
    probe.forgive("status of 415")  # the refused upload, as Chromium logs it


def test_a_file_over_the_limit_or_of_a_refused_type_is_refused_before_a_byte_is_sent(
    page: Page, media_server: tuple[LiveServer, Path]
) -> None:
    server, _ = media_server
    uploads: list[str] = []
    page.on(
        "request", lambda request: uploads.append(request.url) if request.method == "POST" else None
    )
    open_new_chat(page, server)

    pick(page, "holiday.png", b"\x89PNG" + bytes(int(19.4 * 1024 * 1024)))
    pick(page, "archive.zip", b"PK\x03\x04" + bytes(100), "application/zip")

    big = chip(page, "holiday.png")
    expect(big).to_have_attribute("data-state", "refused")
    expect(big.locator(".attachment__size")).to_have_text("19.4 MB")
    expect(big.locator(".attachment__status")).to_have_text(
        "“holiday.png” is 19.4 MB; files can be at most 10 MB."
    )
    expect(chip(page, "archive.zip").locator(".attachment__status")).to_have_text(
        "“archive.zip” is not a kind of file this chat takes."
    )
    assert uploads == []
    expect(page.locator("#send-button")).to_be_disabled()
