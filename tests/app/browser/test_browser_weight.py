"""What a page costs to load: the JavaScript the chat list and a chat page fetch, counted
in bytes as served (before compression), against a budget. The chat list needs no
Markdown, sanitiser or code highlighter; a chat page needs them.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import LiveServer, open_new_chat

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

#: Bytes of JavaScript a page may load, uncompressed.
LIST_BUDGET = 60 * 1024
#: A chat page loads about 460 KB today, 270 KB of it the vendored Markdown, sanitiser and
#: highlighter (loaded at start-up, not yet on demand): the budget keeps it from growing.
CHAT_BUDGET = 480 * 1024


def script_bytes(page: Page) -> dict[str, int]:
    """The scripts the page loaded so far, by URL, with their sizes."""
    return page.evaluate(
        """() => Object.fromEntries(performance.getEntriesByType("resource")
            .filter((entry) => entry.name.endsWith(".js") || entry.name.endsWith(".mjs"))
            .map((entry) => [entry.name, entry.decodedBodySize]))"""
    )


def test_the_chat_list_loads_no_markdown_sanitiser_or_highlighter(
    page: Page, daphne_server: LiveServer
) -> None:
    page.goto(f"{daphne_server.url}/")
    expect(page.get_by_role("heading", name="Recent chats")).to_be_visible()
    page.wait_for_load_state("networkidle")

    scripts = script_bytes(page)

    assert not [url for url in scripts if "vendor/" in url], scripts
    assert sum(scripts.values()) <= LIST_BUDGET, scripts


def test_a_chat_page_stays_within_its_budget(page: Page, daphne_server: LiveServer) -> None:
    open_new_chat(page, daphne_server)
    page.wait_for_load_state("networkidle")

    scripts = script_bytes(page)

    assert sum(scripts.values()) <= CHAT_BUDGET, scripts
