"""Deleting, from the chat list, a chat whose answer waits for its person's reply: the
dialog says the question is cancelled and the answer stopped first, and the chat goes."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import LiveServer, open_new_chat, send

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


def test_a_chat_waiting_for_a_reply_is_deleted_from_the_list(
    page: Page, daphne_server: LiveServer
) -> None:
    session_id = open_new_chat(page, daphne_server)
    send(page, "help")
    expect(page.locator(".widget--ask")).to_be_visible()  # the run waits for the answer

    page.goto(f"{daphne_server.url}/")
    page.get_by_role("link", name="Delete help").click()
    dialog = page.get_by_role("dialog", name="Delete this chat?")
    expect(dialog).to_contain_text("the question is cancelled and the answer stopped first")
    dialog.get_by_role("button", name="Delete").click()
    expect(dialog).to_have_count(0)
    expect(page.get_by_text("No chats here any more.")).to_be_visible()
    key = session_id.replace("-", "")
    assert daphne_server.rows("SELECT COUNT(*) FROM agent_app_chatsession WHERE id = ?", key) == [
        (0,)
    ]
