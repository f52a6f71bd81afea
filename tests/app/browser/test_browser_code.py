"""Answers as people read and reuse them: highlighted code blocks, copy buttons on each code
block and each answer, and an answer stopped mid-stream shown as finished Markdown.

Runs at 1280 px and 375 px, light and dark (``EVERY_LAYOUT``), on the scripted server
(``browser_model.py``: ``code`` answers with Python, HTML and plain fenced blocks; ``stall``
streams ``Try *what is 12`` and waits to be stopped).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_model import CODE_REPLY, HTML_CODE, PLAIN_CODE, PYTHON_CODE
from tests.app.browser.browser_support import (
    EVERY_LAYOUT,
    LiveServer,
    expect_idle,
    is_narrow,
    last_answer,
    open_new_chat,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

#: highlight.js's a11y themes: keyword colour and block background, light and dark.
THEME = {
    "light": {"keyword": "rgb(121, 40, 161)", "background": "rgb(254, 254, 254)"},
    "dark": {"keyword": "rgb(220, 198, 224)", "background": "rgb(43, 43, 43)"},
}


def color_scheme(page: Page) -> str:
    dark = page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    return "dark" if dark else "light"


@EVERY_LAYOUT
def test_fenced_code_is_highlighted_in_the_theme_of_the_colour_scheme(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "code")
    expect_idle(page)

    blocks = last_answer(page).locator(".code-block")
    expect(blocks.locator(".code-block__language")).to_have_text(["python", "html", "text"])
    python, html, plain = (blocks.nth(i).locator("pre code") for i in range(3))
    expect(python).to_have_text(PYTHON_CODE)
    expect(python.locator(".hljs-keyword").first).to_have_text("def")
    expect(python.locator(".hljs-string").first).to_contain_text("Hello")
    expect(python.locator(".hljs-comment")).to_have_text("# a comment")

    theme = THEME[color_scheme(page)]
    expect(python.locator(".hljs-keyword").first).to_have_css("color", theme["keyword"])
    expect(python).to_have_css("background-color", theme["background"])

    # The model's markup is highlighted as text: shown, never parsed, never run.
    expect(html).to_have_text(HTML_CODE)
    expect(html.locator(".hljs-tag").first).to_contain_text("<script>")
    assert page.locator("#transcript script, #transcript img").count() == 0
    assert page.evaluate("window.zettInjected") is None
    assert html.evaluate("code => [...code.querySelectorAll('*')].every(n => n.tagName === 'SPAN')")

    # Wider than its frame (on a phone), a block scrolls sideways, by keyboard too.
    scrollable = python.evaluate("code => code.scrollWidth > code.clientWidth")
    assert scrollable == is_narrow(page)
    assert python.evaluate("code => code.tabIndex") == (0 if scrollable else -1)

    # A block without a language keeps the frame, and stays plain.
    expect(plain).to_have_text(PLAIN_CODE)
    expect(plain.locator("span")).to_have_count(0)


@EVERY_LAYOUT
def test_copy_buttons_copy_a_code_block_and_the_whole_answer(
    page: Page, scripted_server: LiveServer
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_new_chat(page, scripted_server)
    send(page, "code")
    expect_idle(page)

    copy_code = last_answer(page).get_by_role("button", name="Copy python code")
    copy_code.click()
    expect(last_answer(page).locator(".code-block").first.locator(".copy-button")).to_have_text(
        "Copied"
    )
    expect(page.locator("#announcer")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == PYTHON_CODE

    copy_answer = page.get_by_role("button", name="Copy answer")
    expect(copy_answer).to_have_count(1)
    copy_answer.click()
    expect(page.locator(".turn__meta .copy-button")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == CODE_REPLY.strip()

    # The confirmation is for a moment; then the button is ready again.
    expect(page.locator(".turn__meta .copy-button")).to_have_text("Copy")
    expect(page.get_by_role("button", name="Copy answer")).to_be_visible()


@EVERY_LAYOUT
def test_an_answer_stopped_mid_stream_is_rendered_as_finished_markdown(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "stall")
    answer = last_answer(page)
    expect(answer).to_contain_text("what is 12")
    # Even while it streams, the open emphasis is shown as emphasis, not as a raw `*`.
    expect(answer.locator("em")).to_have_text("what is 12")

    page.get_by_role("button", name="Stop").click()

    expect(page.locator(".note", has_text="Stopped.")).to_be_visible()
    expect_idle(page)
    expect(answer).not_to_have_class(re.compile(r"\bis-streaming\b"))
    expect(answer).to_have_text("Try what is 12")
    expect(answer.locator("em")).to_have_text("what is 12")
