"""zett's full pages inside a host's own layout, as docs/embedding.md shows (the host's
``agent_app/base.html`` extends its base template; tests/app/widget_host/): the host's
elements keep their computed styles (its body, links, a ``.button`` of its own, its
variables), the page has one ``<main>`` (the host's), the body carries the host's class and
zett's page class, the host's skip link goes to the conversation, ``ZETT_BRAND`` names the
pages, the chat fills the host's main below its header with the composer in view, and a
chat streams there."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import LiveServer, expect_idle, last_answer, send

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

HOST_ELEMENTS = [
    "html",
    "body",
    ".site-header",
    ".site-brand",
    ".site-nav a",
    ".site-nav .button",
    "main",
]
STYLE_PROPERTIES = [
    "font-family",
    "font-size",
    "line-height",
    "color",
    "background-color",
    "box-sizing",
    "margin-top",
    "padding-top",
    "padding-left",
    "border-top-width",
    "text-decoration-line",
    "display",
    "color-scheme",
]
SNAPSHOT = """([selectors, properties]) => Object.fromEntries(selectors.map((selector) => {
  const style = getComputedStyle(document.querySelector(selector));
  const values = properties.map((name) => [name, style.getPropertyValue(name)]);
  return [selector, Object.fromEntries(values)];
}))"""


def host_styles(page: Page) -> dict:
    return page.evaluate(SNAPSHOT, [HOST_ELEMENTS, STYLE_PROPERTIES])


def test_zetts_pages_in_a_host_layout_leave_the_host_as_it_is(
    page: Page, widget_host: LiveServer
) -> None:
    page.goto(f"{widget_host.url}/layout/")
    alone = host_styles(page)

    page.goto(f"{widget_host.url}/chat/")
    assert host_styles(page) == alone
    expect(page).to_have_title("Chats · Test shop help")
    expect(page.get_by_role("heading", level=1)).to_have_text("Test shop help")
    assert page.locator("main").count() == 1
    assert page.evaluate("() => [...document.body.classList]") == ["host-body", "page-list"]

    page.goto(f"{widget_host.url}/chat/s/{uuid.uuid4()}/")
    expect(page.locator("#connection-label")).to_have_text("Connected")
    assert host_styles(page) == alone
    expect(page).to_have_title("New chat · Test shop help")
    expect(page.locator(".sidebar__home")).to_have_text("Test shop help")
    assert page.locator("main").count() == 1
    assert page.evaluate("() => [...document.body.classList]") == ["host-body", "page-chat"]
    skip = page.locator(".host-skip")
    expect(skip).to_have_text("Skip to the conversation")
    expect(skip).to_have_attribute("href", "#conversation")

    # The chat fills the host's main, below the host's header, its composer in view.
    header = page.locator(".site-header").bounding_box()
    app = page.locator(".app").bounding_box()
    main = page.locator("main").bounding_box()
    assert app["y"] >= header["y"] + header["height"] - 1
    assert abs(app["height"] - main["height"]) <= 1
    composer = page.locator("#composer").bounding_box()
    assert composer["y"] + composer["height"] <= page.viewport_size["height"] + 1

    send(page, "hello")
    expect(last_answer(page)).to_contain_text("A scripted reply.")
    expect_idle(page)
    composer = page.locator("#composer").bounding_box()
    assert composer["y"] + composer["height"] <= page.viewport_size["height"] + 1
    assert host_styles(page) == alone
