"""Every JavaScript example of docs/client.md runs, as written, in Chromium on the host
project (``widget_host``), and does what the page says: each ```js block is added to a
page as a module script (with the page's script policy bypassed, as if it were a file of
the page's own), then the test watches what it logs and what it shows."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.app.browser.browser_support import ROOT, WAIT_MS, LiveServer

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "client.md"
EXAMPLES = re.findall(r"^```js\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M)


def in_widget(page: Page, text: str) -> None:
    box = page.locator("zett-chat").get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def widget_tool(page: Page, logged: list[str]) -> None:
    in_widget(page, "highlight p-7")
    expect(page.locator("zett-chat .msg--assistant").last).to_contain_text(
        "The page said: highlighted Red shoes"
    )
    expect(page.locator('[data-product="p-7"]')).to_have_attribute("data-highlighted", "")


def mounted(page: Page, logged: list[str]) -> None:
    chat = page.locator("#help")
    expect(chat.get_by_role("region", name="Help")).to_be_visible()
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    box = chat.get_by_label("Message", exact=True)
    expect(box).to_have_attribute("placeholder", "Ask about our shoes…")
    box.fill("Where are the red shoes?")
    box.press("Enter")
    expect(chat.locator(".msg--assistant").last).to_contain_text(
        "They are highlighted: highlighted p-7"
    )
    expect(page.locator('[data-product="p-7"]')).to_have_attribute("data-highlighted", "")
    wait_for_log(page, logged, "A run started: Where are the red shoes?")


def logs(*lines: str) -> Callable[[Page, list[str]], None]:
    def check(page: Page, logged: list[str]) -> None:
        for line in lines:
            wait_for_log(page, logged, line)

    return check


#: (the page it runs on, what it must do), in the order of the examples in docs/client.md.
CHECKS = [
    ("/?notools", widget_tool),
    ("/blank/", mounted),
    ("/blank/", logs("The answer: Hello from support.")),
    ("/blank/", logs("Asked: Which colour?", "You chose Red.")),
    (
        "/blank/",
        logs('Approving save_note({"title":"Note","text":"buy milk"})', "Saved: Saved note #"),
    ),
    (
        "/blank/",
        logs("They are highlighted: " + json.dumps({"highlighted": "p-7", "name": "Red shoes"})),
    ),
]


def wait_for_log(page: Page, logged: list[str], line: str) -> None:
    """Until a console line contains ``line`` (the console events arrive as the page runs)."""
    while not any(line in text for text in logged):
        page.wait_for_event("console", timeout=WAIT_MS)


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(bypass_csp=True, locale="en-US", timezone_id="UTC")
    context.set_default_timeout(WAIT_MS)
    yield context
    context.close()


def test_the_doc_has_the_examples_this_test_checks() -> None:
    assert len(EXAMPLES) == len(CHECKS)


@pytest.mark.parametrize("index", range(len(CHECKS)))
def test_each_example_of_the_client_doc_runs_as_documented(
    context: BrowserContext, widget_host: LiveServer, index: int
) -> None:
    path, check = CHECKS[index]
    page = context.new_page()
    logged: list[str] = []
    errors: list[str] = []
    page.on("console", lambda message: logged.append(message.text))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{widget_host.url}{path}")
    page.add_script_tag(content=EXAMPLES[index], type="module")
    check(page, logged)
    assert errors == []
