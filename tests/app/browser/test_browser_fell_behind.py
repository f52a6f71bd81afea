"""A page the server drops for reading too slowly (close code 4408) comes back by itself.

A server whose sockets have tiny kernel send buffers and a small unread-bytes cap drops the
page's socket while the demo model streams its answer in bursts; the page reconnects with
``after_seq`` each time and ends with the whole answer, shown once, and the link up.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LiveServer,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    serve,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]


@pytest.fixture(scope="module")
def behind_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {
        "ZETT_DEMO_PACE": "0",
        "ZETT_TEST_SEND_BUFFER": "4096",
        "ZETT_WS_SEND_BUFFER_BYTES": "4096",
    }
    with serve(tmp_path_factory.mktemp("behind"), "behind", "demo", env) as server:
        yield server


def test_a_page_dropped_for_falling_behind_resumes_and_shows_the_whole_answer(
    page: Page, behind_server: LiveServer
) -> None:
    open_new_chat(page, behind_server)
    send(page, "hello")
    expect(last_answer(page)).to_contain_text("with ANTHROPIC_API_KEY", timeout=60_000)
    expect_idle(page)
    expect_connected(page)
    expect(page.locator(".msg--assistant")).to_have_count(1)
    log = behind_server.log.read_text()
    assert "bytes unread" in log, log[-3000:]
