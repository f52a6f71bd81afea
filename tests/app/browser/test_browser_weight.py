"""What a page costs to load: the JavaScript the browser fetched for the chat list and a
chat page, counted in bytes before compression (each resource's decoded size, as the
browser reports it), against a budget. The chat list needs no Markdown, sanitiser or code
highlighter; a chat page fetches Markdown and the sanitiser once it shows a message, and
highlight.js's core and one grammar per language once it shows code in that language.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_model import PYTHON_CODE
from tests.app.browser.browser_support import (
    LiveServer,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

KB = 1024
#: Bytes of JavaScript the chat list may load.
LIST_BUDGET = 60 * KB
#: Bytes of JavaScript a chat page may load with its messages shown (text, no code).
CHAT_BUDGET = 250 * KB
#: Bytes of JavaScript a new chat's page (or a widget) may load before a message is shown.
EMPTY_CHAT_BUDGET = 180 * KB


def scripts_fetched(page: Page) -> dict[str, int]:
    """The scripts the page fetched so far, by path, with their sizes before compression."""
    page.wait_for_load_state("networkidle")
    return page.evaluate(
        """() => Object.fromEntries(performance.getEntriesByType("resource")
            .filter((entry) => /\\.m?js$/.test(new URL(entry.name).pathname))
            .map((entry) => [new URL(entry.name).pathname, entry.decodedBodySize]))"""
    )


def vendor_files(scripts: dict[str, int]) -> list[str]:
    return sorted(path.split("/vendor/", 1)[1] for path in scripts if "/vendor/" in path)


def test_the_chat_list_loads_no_markdown_sanitiser_or_highlighter(
    page: Page, daphne_server: LiveServer
) -> None:
    page.goto(f"{daphne_server.url}/")
    expect(page.get_by_role("heading", name="Recent chats")).to_be_visible()

    scripts = scripts_fetched(page)

    assert vendor_files(scripts) == [], scripts
    assert sum(scripts.values()) <= LIST_BUDGET, scripts


def test_a_new_chat_loads_no_vendor_code_until_a_message_is_shown(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)

    scripts = scripts_fetched(page)

    assert vendor_files(scripts) == [], scripts
    assert sum(scripts.values()) <= EMPTY_CHAT_BUDGET, scripts


def test_a_chat_with_text_answers_loads_markdown_and_the_sanitiser_only(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "prose")
    expect_idle(page)
    expect(last_answer(page).locator("h2")).to_have_text("Shopping list")

    page.reload()
    expect(last_answer(page).locator("h2")).to_have_text("Shopping list")
    expect(last_answer(page).locator("table")).to_be_visible()
    scripts = scripts_fetched(page)

    assert vendor_files(scripts) == ["dompurify/purify.min.js", "marked/marked.esm.js"], scripts
    assert sum(scripts.values()) <= CHAT_BUDGET, scripts


def test_a_chat_with_python_code_loads_the_python_grammar_only(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "python")
    expect_idle(page)
    page.reload()

    code = last_answer(page).locator(".code-block pre code")
    expect(code).to_have_text(PYTHON_CODE)
    expect(code.locator(".hljs-keyword").first).to_have_text("def")
    scripts = scripts_fetched(page)

    assert vendor_files(scripts) == [
        "dompurify/purify.min.js",
        "highlight/core.min.js",
        "highlight/languages/python.min.js",
        "marked/marked.esm.js",
    ], scripts
    maps = page.evaluate(
        "() => performance.getEntriesByType('resource').filter((e) => e.name.endsWith('.map'))"
    )
    assert maps == []


def test_the_widget_loads_markdown_only_once_it_shows_an_answer(
    page: Page, widget_host: LiveServer
) -> None:
    page.goto(f"{widget_host.url}/?bare")
    host = scripts_fetched(page)
    page.goto(f"{widget_host.url}/")
    chat = page.locator("zett-chat").first
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    scripts = scripts_fetched(page)
    assert vendor_files(scripts) == [], scripts
    assert sum(size for path, size in scripts.items() if path not in host) <= EMPTY_CHAT_BUDGET

    box = chat.get_by_label("Message", exact=True)
    box.fill("python")
    box.press("Enter")
    code = chat.locator(".msg--assistant .code-block pre code").last
    expect(code.locator(".hljs-keyword").first).to_have_text("def")
    scripts = scripts_fetched(page)

    assert vendor_files(scripts) == [
        "dompurify/purify.min.js",
        "highlight/core.min.js",
        "highlight/languages/python.min.js",
        "marked/marked.esm.js",
    ], scripts
    # The sanitiser's build sets a global while it loads: it is put back as the host had it.
    assert page.evaluate("() => 'DOMPurify' in globalThis") is False
