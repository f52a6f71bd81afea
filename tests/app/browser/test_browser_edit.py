"""Answering the last message again: Regenerate on the last answer, Edit on the last message.

The replaced turn leaves the page (every tab's) when the new run starts, and stays out after
a reload; the server keeps it as an earlier version (test_browser_versions.py switches to
it). The last message and answer have buttons named so; none is offered while a run goes.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LAYOUTS,
    TRACK_SOCKETS,
    LiveServer,
    drop_socket,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    transcript_snapshot,
    wait_for_value,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

TWO_LAYOUTS = pytest.mark.parametrize(
    "page",
    [LAYOUTS["wide-light"], LAYOUTS["narrow-dark"]],
    ids=["wide-light", "narrow-dark"],
    indirect=True,
)


def superseded_rows(server: LiveServer, session_id: str) -> list[tuple]:
    return server.rows(
        "SELECT role, superseded FROM agent_app_chatmessage WHERE session_id = ? ORDER BY id",
        session_id.replace("-", ""),
    )


@TWO_LAYOUTS
def test_regenerate_answers_the_last_message_again_in_every_tab(
    page: Page, daphne_server: LiveServer
) -> None:
    session_id = open_new_chat(page, daphne_server)
    send(page, "What is 2**10?")
    expect(last_answer(page).locator("strong")).to_have_text("1024")
    expect_idle(page)
    other = page.context.new_page()
    other.goto(page.url)
    expect_connected(other)
    page.evaluate("document.querySelector('#transcript .turn').dataset.old = 'yes'")

    page.get_by_role("button", name="Regenerate the last answer").click()

    expect(page.locator("#transcript [data-old]")).to_have_count(0)
    expect(last_answer(page).locator("strong")).to_have_text("1024")
    expect_idle(page)
    expect(page.locator(".msg--user .msg__body")).to_have_text(["What is 2**10?"])
    expect(page.locator(".turn")).to_have_count(1)
    expect(other.locator(".turn")).to_have_count(1)
    expect(last_answer(other).locator("strong")).to_have_text("1024")
    expect_idle(other)
    assert transcript_snapshot(other) == transcript_snapshot(page)
    other.close()
    rows = superseded_rows(daphne_server, session_id)
    assert [superseded for _, superseded in rows] == [1, 1, 1, 1, 0, 0, 0, 0]

    before = transcript_snapshot(page)
    page.reload()
    expect_connected(page)
    assert transcript_snapshot(page) == before


@TWO_LAYOUTS
def test_edit_replaces_the_last_message_and_its_answer(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "What is 6 * 7?")
    expect(last_answer(page).locator("strong")).to_have_text("42")
    expect_idle(page)

    edit = page.get_by_role("button", name="Edit your last message")
    edit.click()
    editor = page.get_by_label("Edit your message")
    expect(editor).to_be_focused()
    expect(editor).to_have_value("What is 6 * 7?")
    editor.press("Escape")  # changed my mind
    expect(editor).to_have_count(0)
    expect(edit).to_be_focused()
    expect(page.locator(".msg--user .msg__body")).to_have_text(["What is 6 * 7?"])

    edit.click()
    editor.fill("What is 6 * 8?")
    editor.press("Enter")

    expect(last_answer(page).locator("strong")).to_have_text("48")
    expect(page.locator(".msg--user .msg__body")).to_have_text(["What is 6 * 8?"])
    expect(page.locator(".tool-card")).to_have_count(1)
    expect_idle(page)
    before = transcript_snapshot(page)
    page.reload()
    expect_connected(page)
    assert transcript_snapshot(page) == before


def test_edit_and_regenerate_are_named_for_the_last_turn_and_not_offered_while_it_runs(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)
    send(page, "markdown")
    expect_idle(page)
    edits = page.get_by_role("button", name="Edit your last message")
    regenerates = page.get_by_role("button", name="Regenerate the last answer")
    expect(edits).to_have_count(1)
    expect(page.locator(".msg--user").last.get_by_role("button", name="Edit")).to_be_visible()
    expect(regenerates).to_have_count(1)
    expect(page.locator(".turn").last.get_by_role("button", name="Regenerate")).to_be_visible()

    send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")
    expect(edits).to_have_count(0)
    expect(regenerates).to_have_count(0)
    page.get_by_role("button", name="Stop").click()
    expect_idle(page)
    expect(edits).to_have_count(1)
    expect(page.locator(".msg--user").last).to_contain_text("stall")
    expect(regenerates).to_have_count(1)


def test_the_edit_button_keeps_the_keyboard_while_the_link_drops_and_comes_back(
    page: Page, scripted_server: LiveServer
) -> None:
    page.add_init_script(TRACK_SOCKETS)
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)
    edit = page.get_by_role("button", name="Edit your last message")
    edit.focus()

    drop_socket(page)

    wait_for_value(page, "window.zettSockets.length", 2)
    expect_connected(page)
    expect(edit).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_label("Edit your message")).to_be_focused()
