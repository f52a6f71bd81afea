"""Choosing an assistant in the browser: with two assistants, New chat offers both; the
chosen one is named on the page, binds the chat when its first message is sent, and is
shown in the list."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import LiveServer, expect_connected, expect_idle, send, serve

pytest_plugins = ["tests.app.browser.browser_fixtures"]


@pytest.fixture(scope="module")
def two_assistants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"ZETT_ASSISTANTS": "tests.app.browser_assistants.Helper"}
    with serve(tmp_path_factory.mktemp("assistants"), "assistants", "demo", env) as server:
        yield server


def test_new_chat_offers_the_assistants_and_the_chat_keeps_the_one_chosen(
    page: Page, two_assistants: LiveServer
) -> None:
    page.goto(f"{two_assistants.url}/")
    page.locator("summary", has_text="New chat").first.click()
    choices = page.get_by_role("list", name="Start a chat with").first
    expect(choices.get_by_role("link")).to_have_text(["zett", "Helper"])
    choices.get_by_role("link", name="Helper").click()
    expect(page).to_have_url(re.compile(r"/s/[0-9a-f-]{36}/\?assistant=helper$"))
    expect(page.locator("#chat-assistant")).to_have_text("with Helper")
    expect_connected(page)
    send(page, "hello")
    expect_idle(page)
    session_id = page.url.split("/s/")[1].split("/")[0]
    with sqlite3.connect(two_assistants.database) as database:
        (bound,) = database.execute(
            "SELECT assistant FROM agent_app_chatsession WHERE id = ?",
            (session_id.replace("-", ""),),
        ).fetchone()
    assert bound == "helper"
    page.goto(f"{two_assistants.url}/")
    expect(page.locator(".session-links__assistant").first).to_have_text("Helper")
