"""axe-core (vendored in ``tests/app/browser/vendor``) finds no serious or critical accessibility
violation on the list page and on the chat page, at 1280 px and 375 px, light and dark.

The list page is checked with search results, each row's Rename and Delete, and the
delete confirmation open. The chat page is checked with what it can show: highlighted
code with copy buttons, reasoning, a cut-off warning, a failed answer with Retry, answer
footers with time and tokens; (on the demo server) an open question with its countdown
and a steer queued behind it, then the same stopped, with Edit and Regenerate offered, and
the title being renamed.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    EVERY_LAYOUT,
    LiveServer,
    axe_violations,
    expect_idle,
    open_new_chat,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


def describe(violations: list[dict]) -> str:
    return "\n".join(
        f"{v['impact']} {v['id']}: {v['help']} at {[n['target'] for n in v['nodes']]}"
        for v in violations
    )


@EVERY_LAYOUT
def test_the_list_page_has_no_serious_accessibility_violations(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)

    page.goto(f"{scripted_server.url}/")
    expect(page.get_by_role("heading", name="Recent chats")).to_be_visible()
    violations = axe_violations(page)
    assert violations == [], describe(violations)

    page.goto(f"{scripted_server.url}/?q=hello")
    expect(page.get_by_role("heading", name="Chats matching “hello”")).to_be_visible()
    expect(page.get_by_role("button", name="Rename hello")).to_be_visible()
    violations = axe_violations(page)
    assert violations == [], describe(violations)

    page.get_by_role("link", name="Delete hello").click()
    expect(page.get_by_role("dialog", name="Delete this chat?")).to_be_visible()
    violations = axe_violations(page)
    assert violations == [], describe(violations)


@EVERY_LAYOUT
def test_the_chat_page_has_no_serious_accessibility_violations(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    for message in ("code", "cut off", "fail"):
        send(page, message)
        expect_idle(page)
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.locator(".hljs-keyword").first).to_be_visible()

    violations = axe_violations(page)
    assert violations == [], describe(violations)


@EVERY_LAYOUT
def test_the_chat_page_with_an_open_question_has_no_serious_accessibility_violations(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "Save a note")
    question = page.locator(".widget--ask")
    expect(question).to_contain_text("What should the note say?")
    expect(question.locator(".widget__deadline")).to_be_visible()
    box = page.get_by_label("Steer the answer")
    box.fill("Make it short")
    box.press("Enter")
    expect(page.locator(".msg--steer")).to_have_attribute("data-steer", "queued")

    violations = axe_violations(page)
    assert violations == [], describe(violations)

    page.get_by_role("button", name="Stop").click()
    expect(question).to_have_attribute("data-state", "stopped")
    expect(page.get_by_role("button", name="Edit your last message")).to_be_visible()
    page.get_by_role("button", name="Rename this chat").click()
    expect(page.get_by_label("New title")).to_be_focused()
    violations = axe_violations(page)
    assert violations == [], describe(violations)
