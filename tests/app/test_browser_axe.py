"""axe-core (vendored in ``tests/app/vendor``) finds no serious or critical accessibility
violation on the list page and on the chat page, at 1280 px and 375 px, light and dark.

The chat page is checked with what it can show: highlighted code with copy buttons,
reasoning, a cut-off warning, a failed answer with Retry, answer footers with time and
tokens, and (on the demo server) an open question widget.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.app.browser_support import (
    EVERY_LAYOUT,
    LiveServer,
    axe_violations,
    expect_idle,
    open_new_chat,
    send,
)

pytest_plugins = ["tests.app.browser_fixtures"]


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
    expect(page.locator(".widget--ask")).to_contain_text("What should the note say?")

    violations = axe_violations(page)
    assert violations == [], describe(violations)
