"""Managing chats in the browser: rename in place (the chat's top bar, the list's rows),
delete after a confirmation dialog, search by title and message text, and the list's pages.

Each test runs in a browser context of its own, so the list holds only that test's chats.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LAYOUTS,
    LiveServer,
    expect_connected,
    expect_idle,
    open_new_chat,
    open_sidebar,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

TWO_LAYOUTS = pytest.mark.parametrize(
    "page",
    [LAYOUTS["wide-light"], LAYOUTS["narrow-dark"]],
    ids=["wide-light", "narrow-dark"],
    indirect=True,
)


def new_chat_saying(page: Page, server: LiveServer, text: str) -> str:
    session_id = open_new_chat(page, server)
    send(page, text)
    expect_idle(page)
    return session_id


@TWO_LAYOUTS
def test_a_chat_is_renamed_in_place_on_its_page_and_in_the_list(
    page: Page, scripted_server: LiveServer
) -> None:
    new_chat_saying(page, scripted_server, "hello")
    title = page.locator("#chat-title")
    expect(title).to_have_text("hello")

    page.get_by_role("button", name="Rename this chat").click()
    box = page.get_by_label("New title")
    expect(box).to_be_focused()
    expect(box).to_have_value("hello")
    box.fill("Greetings <b>from</b> Lisbon")
    box.press("Enter")

    expect(title).to_have_text("Greetings <b>from</b> Lisbon")
    expect(title).to_be_visible()
    expect(page).to_have_title("Greetings <b>from</b> Lisbon · zett")
    expect(page.get_by_role("button", name="Rename this chat")).to_be_focused()
    page.reload()
    expect_connected(page)
    expect(title).to_have_text("Greetings <b>from</b> Lisbon")
    current = open_sidebar(page).locator("a[aria-current=page]")
    expect(current).to_contain_text("Greetings <b>from</b> Lisbon")

    page.goto(f"{scripted_server.url}/")
    rename = page.get_by_role("button", name="Rename Greetings <b>from</b> Lisbon")
    rename.click()
    page.get_by_label("New title").press("Escape")
    expect(page.get_by_label("New title")).to_have_count(0)
    expect(rename).to_be_focused()
    rename.click()
    page.get_by_label("New title").fill("Lisbon, again")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".session-links__title")).to_have_text(["Lisbon, again"])
    page.reload()
    expect(page.locator(".session-links__title")).to_have_text(["Lisbon, again"])
    assert page.locator("main b").count() == 0


@TWO_LAYOUTS
def test_a_chat_is_deleted_only_after_the_confirmation(
    page: Page, scripted_server: LiveServer
) -> None:
    session_id = new_chat_saying(page, scripted_server, "keep me")
    doomed = new_chat_saying(page, scripted_server, "delete me")

    page.get_by_role("button", name="Delete this chat").click()
    dialog = page.get_by_role("dialog", name="Delete this chat?")
    expect(dialog).to_contain_text("“delete me” and everything in it")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(page.get_by_role("button", name="Delete this chat")).to_be_focused()

    page.get_by_role("button", name="Delete this chat").click()
    dialog.get_by_role("button", name="Delete").click()

    expect(page).to_have_url(f"{scripted_server.url}/")
    expect(page.locator(".session-links__title")).to_have_text(["keep me"])
    rows = scripted_server.rows(
        "SELECT COUNT(*) FROM agent_app_chatsession WHERE id = ?", doomed.replace("-", "")
    )
    assert rows == [(0,)]

    page.get_by_role("link", name="Delete keep me").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_text("No chats here any more.")).to_be_visible()
    expect(page.get_by_role("searchbox", name="Search chats")).to_be_focused()
    assert scripted_server.rows(
        "SELECT COUNT(*) FROM agent_app_chatmessage WHERE session_id = ?",
        session_id.replace("-", ""),
    ) == [(0,)]


def test_chats_are_found_by_their_title_and_by_the_text_of_their_messages(
    page: Page, scripted_server: LiveServer
) -> None:
    new_chat_saying(page, scripted_server, "markdown")  # the answer lists "Oat milk"
    new_chat_saying(page, scripted_server, "code")
    new_chat_saying(page, scripted_server, "hello")

    sidebar = open_sidebar(page)
    search = sidebar.get_by_role("searchbox", name="Search chats")
    search.fill("OAT MILK")
    search.press("Enter")

    expect(page).to_have_url(re.compile(r"/\?q=OAT\+MILK$"))
    expect(page.get_by_role("heading", name="Chats matching “OAT MILK”")).to_be_visible()
    expect(page.locator(".session-links__title")).to_have_text(["markdown"])

    box = page.get_by_role("searchbox", name="Search chats")
    expect(box).to_have_value("OAT MILK")
    box.fill("cod")
    box.press("Enter")
    expect(page.locator(".session-links__title")).to_have_text(["code"])
    box.fill("no such words")
    box.press("Enter")
    expect(page.get_by_text("No chat matches “no such words”.")).to_be_visible()
