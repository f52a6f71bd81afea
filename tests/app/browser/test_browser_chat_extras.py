"""What people expect of a chat page beyond chatting: short titles on every tab and in the
list, a remembered light/dark choice applied before anything is painted, exporting a chat,
and maths typeset by KaTeX (loaded only for an answer that has maths).

The page's strict CSP stays on: the probe fails a test on any console error, and a CSP
refusal (an inline style, an inline script) is one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LAYOUTS,
    LiveServer,
    axe_violations,
    expect_idle,
    last_answer,
    open_new_chat,
    open_sidebar,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

DARK_BG = "rgb(21, 22, 20)"
LIGHT_BG = "rgb(247, 247, 245)"

#: Records, as the page is parsed, whether <html> had its theme when each stylesheet link
#: and the body were inserted (an init script runs before any of the page's own).
RECORD_THEME_AT_PARSE = """
window.zettThemeAtParse = [];
new MutationObserver((records) => {
  for (const record of records) {
    for (const node of record.addedNodes) {
      if (node.nodeName === "BODY" || (node.nodeName === "LINK" && node.rel === "stylesheet")) {
        const theme = document.documentElement.dataset.zettTheme ?? null;
        window.zettThemeAtParse.push([node.nodeName, theme]);
      }
    }
  }
}).observe(document, { childList: true, subtree: true });
"""


def body_background(page: Page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def test_a_new_chat_gets_a_short_title_on_every_tab_and_in_the_list(
    page: Page, scripted_server: LiveServer
) -> None:
    session_id = open_new_chat(page, scripted_server)
    other = page.context.new_page()
    other.goto(f"{scripted_server.url}/s/{session_id}/")
    expect(other.locator("#connection-label")).to_have_text("Connected")

    send(page, "What time is it in Tokyo? I fly there tomorrow morning.")
    expect_idle(page)
    for tab in (page, other):
        expect(tab.locator("#chat-title")).to_have_text("What time is it in Tokyo")
        expect(tab).to_have_title("What time is it in Tokyo · zett")
    current = open_sidebar(page).locator("a[aria-current=page] .session-links__title")
    expect(current).to_have_text("What time is it in Tokyo")
    other.close()

    page.goto(f"{scripted_server.url}/")
    expect(page.locator(".session-links__title").first).to_have_text("What time is it in Tokyo")


def test_the_theme_choice_is_remembered_and_set_before_the_page_is_painted(
    page: Page, scripted_server: LiveServer
) -> None:
    page.goto(f"{scripted_server.url}/")
    choice = page.get_by_label("Theme")
    expect(choice).to_have_value("system")
    assert body_background(page) == LIGHT_BG  # the system's (light, in this context)

    choice.select_option("dark")
    expect(page.locator("html")).to_have_attribute("data-zett-theme", "dark")
    assert body_background(page) == DARK_BG
    assert page.evaluate("localStorage.getItem('zett-theme')") == "dark"

    page.add_init_script(RECORD_THEME_AT_PARSE)
    session_id = open_new_chat(page, scripted_server)
    seen = page.evaluate("window.zettThemeAtParse")
    assert [name for name, _ in seen][:1] == ["LINK"] and "BODY" in [name for name, _ in seen]
    assert all(theme == "dark" for _, theme in seen), seen
    expect(page.get_by_label("Theme")).to_have_value("dark")
    # The highlighter's dark sheet applies, whatever the system says.
    assert page.evaluate(
        """[...document.querySelectorAll("link[data-zett-scheme-media]")]
             .map((link) => [link.href.includes("dark"), link.media])"""
    ) == [[False, "not all"], [True, "all"]]

    page.reload()
    expect(page.locator("#connection-label")).to_have_text("Connected")
    assert page.url.endswith(f"/s/{session_id}/")
    assert all(theme == "dark" for _, theme in page.evaluate("window.zettThemeAtParse"))
    open_sidebar(page).get_by_label("Theme").select_option("system")
    expect(page.locator("html")).not_to_have_attribute("data-zett-theme", re.compile(".*"))
    assert page.evaluate("localStorage.getItem('zett-theme')") is None
    assert body_background(page) == LIGHT_BG
    assert axe_violations(page) == []


def test_a_chat_is_exported_as_markdown_and_json(page: Page, scripted_server: LiveServer) -> None:
    open_new_chat(page, scripted_server)
    send(page, "markdown")
    expect_idle(page)
    export = page.get_by_label("Export this chat")
    export.click()
    with page.expect_download() as info:
        page.get_by_role("link", name="Markdown (.md)").click()
    download = info.value
    assert re.fullmatch(r"markdown-\d{4}-\d\d-\d\d\.md", download.suggested_filename)
    text = Path(download.path()).read_text(encoding="utf-8")
    assert text.startswith("# markdown\n")
    assert "## You\n\nmarkdown\n" in text and "## Shopping list" in text

    with page.expect_download() as info:
        page.get_by_role("link", name="JSON (.json)").click()
    document = json.loads(Path(info.value.path()).read_text(encoding="utf-8"))
    assert [message["role"] for message in document["messages"]] == ["user", "assistant"]
    assert axe_violations(page) == []


@pytest.mark.parametrize("page", [LAYOUTS["narrow-dark"]], indirect=True)
def test_on_a_phone_export_is_in_the_drawer_and_the_title_keeps_the_bar(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    drawer_export = page.locator(".sidebar__export")
    send(page, "hello there")
    expect_idle(page)
    expect(page.get_by_label("Export this chat")).to_be_hidden()
    title = page.locator("#chat-title")
    assert title.evaluate("node => node.scrollWidth <= node.clientWidth")  # not cut
    open_sidebar(page)
    expect(drawer_export).to_be_visible()
    with page.expect_download() as info:
        drawer_export.get_by_role("link", name="JSON").click()
    assert info.value.suggested_filename.startswith("hello-there-")


def test_maths_is_typeset_safely_and_prices_stay_text(
    page: Page, scripted_server: LiveServer
) -> None:
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    open_new_chat(page, scripted_server)
    send(page, "prices")
    expect_idle(page)
    expect(last_answer(page)).to_contain_text("Tea is $5 and coffee is $10, or US$5-$10 for both.")
    assert not [url for url in fetched if "katex" in url]  # no maths, no KaTeX

    send(page, "maths")
    expect_idle(page)
    answer = last_answer(page)
    expect(answer.locator(".katex")).to_have_count(4)  # two inline, the display, \href's
    expect(answer.locator('div[data-math="display-done"] .katex-display')).to_have_count(1)
    expect(answer.locator(".katex-mathml math").first).to_be_attached()
    expect(answer.locator(".math--error")).to_have_text("\\frac{1}{")
    expect(answer).to_contain_text("Tea is $5 and coffee is $10, or US$5-$10 for both.")
    assert answer.locator("a").count() == 0  # \href is refused: no link at all
    assert page.evaluate("window.zettInjected") is None
    assert page.evaluate("typeof window.katex") == "undefined"
    assert [url for url in fetched if url.endswith("katex.min.js")]
    # The fonts come from the app itself (KaTeX_Main is what the formulas use).
    expect(answer.locator(".katex .mord").first).to_be_visible()
    assert page.evaluate("async () => (await document.fonts.load('16px KaTeX_Main')).length") >= 1
