"""Keyboard and screen-reader use: focus after a reply widget, Escape to stop, the offline
countdown, the skip links, and sidebar titles that use the width they have.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    EVERY_LAYOUT,
    LAYOUTS,
    LiveServer,
    SocketGate,
    composer,
    expect_idle,
    is_narrow,
    last_answer,
    open_new_chat,
    open_sidebar,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


@EVERY_LAYOUT
def test_focus_returns_to_the_composer_after_each_reply_widget(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "Save a note")

    question = page.locator(".widget--ask")
    expect(question.get_by_label("Your answer")).to_be_focused()
    page.keyboard.type("Buy oat milk")
    page.keyboard.press("Enter")

    approval = page.locator(".widget--approval")
    approve = approval.get_by_role("button", name="Approve")
    expect(approve).to_be_focused()
    page.keyboard.press("Tab")
    expect(approval.get_by_role("button", name="Deny")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(approve).to_be_focused()
    page.keyboard.press("Enter")

    expect(approval.locator(".widget__status")).to_have_text("You approved this.")
    expect(last_answer(page)).to_contain_text("Saved note")
    expect_idle(page)
    expect(composer(page)).to_be_focused()
    page.keyboard.type("What is 6 * 7?")
    page.keyboard.press("Enter")
    expect(last_answer(page).locator("strong")).to_have_text("42")


@EVERY_LAYOUT
def test_escape_stops_a_running_answer_unless_focus_is_in_a_widget(
    page: Page, daphne_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, daphne_server)
    send(page, "Save a note")
    answer_box = page.locator(".widget--ask").get_by_label("Your answer")
    expect(answer_box).to_be_focused()

    page.keyboard.press("Escape")  # belongs to the widget: the run goes on
    composer(page).focus()
    page.keyboard.press("Escape")

    expect(page.locator(".note", has_text="Stopped.")).to_be_visible()
    expect_idle(page)
    expect(answer_box).to_be_disabled()
    assert [frame["type"] for frame in gate.sent].count("cancel") == 1


@pytest.mark.parametrize(
    "page",
    [LAYOUTS["wide-light"], LAYOUTS["narrow-dark"]],
    ids=["wide-light", "narrow-dark"],
    indirect=True,
)
def test_offline_the_page_counts_down_to_the_next_attempt_and_keeps_the_text(
    page: Page, daphne_server: LiveServer
) -> None:
    """Two layouts only: reaching a wait of several seconds takes real backoff time."""
    gate = SocketGate(page)
    open_new_chat(page, daphne_server)
    label = page.locator("#connection-label")

    gate.block()
    gate.drop()

    # Each refused attempt doubles the wait (0.5 s, 1 s, 2 s, 4 s, ± 20 %).
    expect(label).to_have_text(re.compile(r"^Offline, retrying in [3-9] s$"))
    seconds = int(re.search(r"\d+", label.text_content()).group())
    expect(label).to_have_text(f"Offline, retrying in {seconds - 1} s")
    expect(page.locator("#connection-status")).to_have_text("Offline. Retrying shortly.")

    send(page, "What is 6 * 7?")
    expect(page.locator(".notice")).to_contain_text("Not connected, so nothing was sent.")
    expect(composer(page)).to_have_value("What is 6 * 7?")

    gate.unblock()
    page.get_by_role("button", name="Retry now").click()
    expect(label).to_have_text("Connected")
    composer(page).press("Enter")
    expect(last_answer(page).locator("strong")).to_have_text("42")


@EVERY_LAYOUT
def test_skip_links_say_where_they_go(page: Page, daphne_server: LiveServer) -> None:
    page.goto(f"{daphne_server.url}/")
    skip = page.locator(".skip-link")
    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    expect(skip).to_have_text("Skip to the main content")
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/#main$"))

    open_new_chat(page, daphne_server)
    skip.focus()  # the chat page puts the keyboard in the composer on load
    expect(skip).to_have_text("Skip to the conversation")
    expect(skip).to_have_attribute("href", "#conversation")
    expect(skip).to_be_in_viewport()


LONG_TITLE = "What is 1/3 + 1/6 when it is added to the other fractions we spoke about today"


@EVERY_LAYOUT
def test_sidebar_titles_use_the_width_and_show_the_whole_title_on_hover(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, LONG_TITLE)
    expect_idle(page)
    # A title made from a message is short: a person's own may be long.
    expect(page.locator("#chat-title")).to_have_text(
        "What is 1/3 + 1/6 when it is added to the other"
    )
    page.get_by_role("button", name="Rename this chat").click()
    page.get_by_label("New title").fill(LONG_TITLE)
    page.get_by_label("New title").press("Enter")
    expect(page.locator("#chat-title")).to_have_text(LONG_TITLE)
    page.reload()
    expect(page.locator("#connection-label")).to_have_text("Connected")

    sidebar = open_sidebar(page)
    title = sidebar.locator("a[aria-current=page] .session-links__title")
    expect(title).to_have_text(LONG_TITLE)
    expect(title).to_have_attribute("title", LONG_TITLE)
    widths = title.evaluate(
        """span => {
          const link = span.closest("a");
          const style = getComputedStyle(link);
          const inner = link.clientWidth - parseFloat(style.paddingLeft)
            - parseFloat(style.paddingRight);
          return { span: span.getBoundingClientRect().width, inner, full: span.scrollWidth };
        }"""
    )
    assert abs(widths["span"] - widths["inner"]) < 1, widths
    assert widths["full"] > widths["span"], "the long title should be cut with an ellipsis"
    if not is_narrow(page):
        assert widths["span"] > 200, widths
