"""zett under a sub-path (``daphne --root-path /shop``, as behind a proxy that serves the
site at ``/shop/``): the list, the chat page, its socket, the widget's socket, uploads and
the attachment links all live under ``/shop/``, and a chat streams through it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    CHAT_URL,
    LiveServer,
    PageProbe,
    expect_idle,
    last_answer,
    send,
    serve,
)
from tests.app.test_attachments_files import image_bytes

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

PREFIX = "/shop"


@pytest.fixture(scope="module")
def shop_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    work = tmp_path_factory.mktemp("rootpath")
    env = {"DJANGO_MEDIA_ROOT": str(work / "media")}
    with serve(work, "rootpath", "demo", env, "--root-path", PREFIX) as server:
        yield server


def test_a_chat_under_a_root_path_streams_and_links_under_it(
    page: Page, shop_server: LiveServer, probe: PageProbe
) -> None:
    sockets: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    page.goto(f"{shop_server.url}{PREFIX}/")
    page.get_by_role("link", name="New chat").first.click()
    expect(page).to_have_url(CHAT_URL)
    assert page.url.startswith(f"{shop_server.url}{PREFIX}/s/")
    expect(page.locator("#connection-label")).to_have_text("Connected")

    page.locator("input.attachments__picker").set_input_files(
        {"name": "seen.png", "mimeType": "image/png", "buffer": image_bytes("PNG", (40, 20))}
    )
    expect(page.locator(".attachment--chip", has_text="seen.png")).to_have_attribute(
        "data-state", "ready"
    )
    send(page, "What is 1/3 + 1/6?")
    expect(last_answer(page)).to_contain_text("You attached one file")
    expect_idle(page)
    thumb = page.locator(".msg--user img.attachment__thumb")
    page.wait_for_function(
        "() => { const i = document.querySelector('.msg--user img.attachment__thumb');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    assert thumb.get_attribute("src").startswith(f"{PREFIX}/s/")

    # After a reload the history's attachment links (built for the socket) keep the prefix.
    page.reload()
    expect(page.locator("#connection-label")).to_have_text("Connected")
    link = page.locator(".msg--user a").first
    assert link.get_attribute("href").startswith(f"{PREFIX}/s/")
    assert sockets and all(
        url.split("://", 1)[1].split("/", 1)[1].startswith("shop/ws/") for url in sockets
    )
    # The chat list and the page's own links stay under the prefix.
    page.goto(f"{shop_server.url}{PREFIX}/")
    hrefs = page.locator("a[href^='/']").evaluate_all(
        "(all) => all.map((a) => a.getAttribute('href'))"
    )
    assert hrefs and all(href.startswith(f"{PREFIX}/") for href in hrefs), hrefs
