"""The widget (``{% zett_chat %}``) in a host page that is not zett's: its own base.html,
a CSS-framework-like stylesheet and its own ``#chat-title``, ``#sidebar``, ``#transcript``,
``#send-button`` and ``#composer-input`` (tests/app/widget_host/). The widget streams,
asks, approves and resumes after a reload; the host's elements and computed styles are
the same as without it; two widgets live side by side; the launcher works at 375 px; axe
finds nothing serious in the widget; a host-page tool is answered by the page, or, with
no page to answer it, ends with a clear result at its deadline, and outlives a SIGKILL of
the server; a remembered chat that was deleted gives way to a new one; a file picked in
the widget is uploaded, sent and shown with its message, after a reload too."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    NARROW,
    WIDGET_TOOL_TIMEOUT,
    LiveServer,
    PageProbe,
    RestartableServer,
    axe_violations,
)
from tests.app.test_attachments_files import image_bytes

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

#: The host's own elements, and the computed styles compared with and without the widget.
HOST_ELEMENTS = [
    "body",
    "#chat-title",
    "#sidebar",
    "#transcript",
    "#send-button",
    "#composer-input",
    ".lead",
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
    "border-top-width",
    "border-top-style",
    "text-transform",
    "letter-spacing",
    "display",
]
HOST_SNAPSHOT = """([selectors, properties]) => {
  const found = {};
  for (const selector of selectors) {
    const nodes = document.querySelectorAll(selector);
    const node = nodes[0];
    const style = getComputedStyle(node);
    found[selector] = {
      count: nodes.length,
      text: node.matches("textarea") ? node.value : node.textContent.trim(),
      style: Object.fromEntries(properties.map((name) => [name, style.getPropertyValue(name)])),
    };
  }
  found.title = document.title;
  return found;
}"""


def widget(page: Page, index: int = 0):
    return page.locator("zett-chat").nth(index)


def send_in(chat, text: str) -> None:
    # Sent before the socket opens, a message stays in the composer with a notice (the
    # page's rule); these tests send once the widget is connected, as a person would.
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    box = chat.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def expect_idle_in(chat) -> None:
    expect(chat.get_by_role("button", name="Send")).to_be_visible()
    expect(chat.get_by_role("button", name="Stop")).to_be_hidden()


def host_snapshot(page: Page) -> dict:
    return page.evaluate(HOST_SNAPSHOT, [HOST_ELEMENTS, STYLE_PROPERTIES])


def test_the_widget_streams_asks_approves_and_resumes_in_a_host_page_it_leaves_alone(
    page: Page, widget_host: LiveServer
) -> None:
    page.goto(f"{widget_host.url}/?bare")
    without = host_snapshot(page)
    page.goto(f"{widget_host.url}/")
    chat = widget(page)
    expect(chat.get_by_role("heading", name="Ask the shop")).to_be_visible()
    expect(chat.locator(".connection__label")).to_have_text("Connected")

    send_in(chat, "markdown")
    expect(chat.locator(".msg--assistant").last).to_contain_text("Shopping list")
    expect_idle_in(chat)

    send_in(chat, "stall")  # streams, then waits: a steer cuts it short, then stop the next
    expect(chat.locator(".msg--assistant").last).to_contain_text("Try")
    steer = chat.get_by_label("Steer the answer")
    steer.fill("say Shorter.")
    steer.press("Enter")
    expect(chat.locator(".msg--steer")).to_have_attribute("data-steer", "applied")
    expect(chat.locator(".msg--assistant").last).to_have_text("Shorter.")
    expect_idle_in(chat)
    send_in(chat, "stall")
    expect(chat.locator(".msg--assistant").last).to_contain_text("Try")
    chat.get_by_role("button", name="Stop").click()
    expect(chat.locator(".note", has_text="Stopped.")).to_be_visible()
    expect_idle_in(chat)

    send_in(chat, "ask")
    question = chat.locator(".widget--ask")
    expect(question).to_contain_text("Which colour?")
    question.get_by_role("button", name="Blue").click()
    expect(chat.locator(".msg--assistant").last).to_contain_text("You chose: Blue")
    expect_idle_in(chat)

    send_in(chat, "note buy milk")
    expect(chat.get_by_role("button", name="Approve")).to_be_visible()
    page.reload()  # the widget remembers its chat: the approval is still there
    chat = widget(page)
    expect(chat.locator(".msg--user:not(.msg--steer)")).to_have_count(5)
    chat.get_by_role("button", name="Approve").click()
    expect(chat.locator(".msg--assistant").last).to_contain_text("Done:")
    expect_idle_in(chat)

    # The host's own elements: the same text, the same computed styles, still one of each.
    assert host_snapshot(page) == without
    expect(page.locator("#chat-title")).to_have_text("Test shop")


def test_a_host_page_tool_is_run_by_the_page_and_its_result_reaches_the_model(
    page: Page, widget_host: LiveServer
) -> None:
    page.goto(f"{widget_host.url}/")
    chat = widget(page)
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    send_in(chat, "highlight p-7")
    expect(page.locator('.product[data-product="p-7"]')).to_have_attribute("data-highlighted", "")
    expect(chat.locator(".msg--assistant").last).to_contain_text(
        "The page said: highlighted Red shoes"
    )
    send_in(chat, "highlight p-404")  # the page's handler throws: the model reads why
    expect(chat.locator(".msg--assistant").last).to_contain_text(
        "The page failed: The page could not run highlight_product: no product p-404"
    )


def test_with_the_page_closed_a_host_page_tool_ends_with_a_clear_result_at_its_deadline(
    page: Page, widget_host: LiveServer
) -> None:
    first = page.context.new_page()
    first.goto(f"{widget_host.url}/?notools")  # a page that does not know the tool asks for it
    chat = widget(first)
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    send_in(chat, "highlight p-7")
    expect(chat.locator(".tool-card").last).to_contain_text("highlight_product")
    first.close()
    later = page  # the same browser: the widget reopens the same chat
    later.goto(f"{widget_host.url}/?notools")
    chat = widget(later)
    expect(chat.locator(".msg--assistant").last).to_contain_text(
        f"The page failed: No page ran highlight_product within {WIDGET_TOOL_TIMEOUT} seconds",
        timeout=(WIDGET_TOOL_TIMEOUT + 15) * 1000,
    )
    assert later.locator(".product[data-highlighted]").count() == 0


def test_two_widgets_on_one_page_each_have_their_own_socket_and_chat(
    page: Page, widget_host: LiveServer
) -> None:
    sockets: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    page.goto(f"{widget_host.url}/two/")
    left, right = widget(page, 0), widget(page, 1)
    for chat in (left, right):
        expect(chat.locator(".connection__label")).to_have_text("Connected")
    assert len(set(sockets)) == 2, sockets
    send_in(left, "hello")
    expect(left.locator(".msg--assistant").last).to_contain_text("A scripted reply.")
    expect_idle_in(left)
    expect(right.locator(".msg")).to_have_count(0)
    send_in(right, "markdown")
    expect(right.locator(".msg--assistant").last).to_contain_text("Shopping list")
    expect(left.locator(".msg")).to_have_count(2)
    # The right one is themed dark, the left follows the (light) system.
    backgrounds = [
        chat.locator(".zett").evaluate("node => getComputedStyle(node).backgroundColor")
        for chat in (left, right)
    ]
    assert backgrounds == ["rgb(247, 247, 245)", "rgb(21, 22, 20)"]
    # A page's own light/dark choice (data-zett-theme on <html>) leads the widget on auto;
    # a widget given its own theme keeps it.
    for choice, left_background in (("dark", "rgb(21, 22, 20)"), ("light", "rgb(247, 247, 245)")):
        page.evaluate(f"document.documentElement.dataset.zettTheme = '{choice}'")
        expect(left.locator(".zett")).to_have_css("background-color", left_background)
        expect(right.locator(".zett")).to_have_css("background-color", "rgb(21, 22, 20)")
    # Maths is typeset inside the widget's shadow root too.
    send_in(left, "maths")
    expect(left.locator(".msg--assistant").last.locator(".katex")).to_have_count(4)


@pytest.mark.parametrize("page", [NARROW], indirect=True)
def test_the_launcher_opens_the_chat_on_a_phone(page: Page, widget_host: LiveServer) -> None:
    page.goto(f"{widget_host.url}/launcher/")
    chat = widget(page)
    launcher = chat.get_by_role("button", name="Chat with us")
    expect(launcher).to_be_visible()
    expect(chat.get_by_role("region", name="Help")).to_be_hidden()
    launcher.click()
    panel = chat.get_by_role("region", name="Help")
    expect(panel).to_be_visible()
    expect(chat.get_by_label("Message", exact=True)).to_be_focused()
    box = panel.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= NARROW["width"]
    send_in(chat, "hello")
    expect(chat.locator(".msg--assistant").last).to_contain_text("A scripted reply.")
    expect_idle_in(chat)
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(launcher).to_be_focused()
    expect(launcher).to_have_attribute("aria-expanded", "false")


def in_widget(violation: dict) -> list:
    """The nodes of an axe violation inside a widget (their target crosses its shadow root)."""
    return [
        node
        for node in violation["nodes"]
        if isinstance(node["target"][0], list) or str(node["target"][0]).startswith("zett-chat")
    ]


def test_axe_finds_nothing_serious_in_the_widget(
    page: Page, widget_host: LiveServer, probe: PageProbe
) -> None:
    page.goto(f"{widget_host.url}/")
    chat = widget(page)
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    send_in(chat, "code")
    expect(chat.locator(".hljs-keyword").first).to_be_visible()
    send_in(chat, "ask")
    expect(chat.locator(".widget--ask")).to_contain_text("Which colour?")
    assert probe.errors == []
    found = [(v["id"], in_widget(v)) for v in axe_violations(page)]
    assert [(rule, nodes) for rule, nodes in found if nodes] == []
    # axe itself measures shadow trees with inline styles, which the page's policy refuses
    # (and says so on the console): that is the checker's, not the widget's.
    probe.errors[:] = [e for e in probe.errors if not e.startswith("Applying inline style")]
    chat.locator(".widget--ask").get_by_role("button", name="Red").click()
    expect(chat.locator(".msg--assistant").last).to_contain_text("You chose: Red")
    assert re.search(r"zett-chat", page.content())


def test_a_widget_whose_chat_was_deleted_starts_a_new_one_on_the_next_visit(
    page: Page, widget_host: LiveServer
) -> None:
    page.goto(f"{widget_host.url}/")
    chat = widget(page)
    send_in(chat, "hello")
    expect(chat.locator(".msg--assistant").last).to_contain_text("A scripted reply.")
    remembered = page.evaluate(
        "Object.keys(localStorage).filter((key) => key.startsWith('zett-chat:shopper:'))"
        ".map((key) => localStorage.getItem(key))"
    )
    assert len(remembered) == 1
    other = page.context.new_page()
    other.goto(f"{widget_host.url}/chat/s/{remembered[0]}/delete/")
    other.get_by_role("button", name="Delete").click()
    # The deletion answers with a redirect to the chat list: closing the tab while that
    # page is still loading could hang Chromium's close on a loaded machine.
    other.wait_for_load_state("load")
    other.close()
    expect(chat.locator(".connection__label")).to_have_text("Disconnected")
    page.reload()
    chat = widget(page)
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    expect(chat.locator(".msg")).to_have_count(0)
    again = page.evaluate(
        "Object.keys(localStorage).filter((key) => key.startsWith('zett-chat:shopper:'))"
        ".map((key) => localStorage.getItem(key))"
    )
    assert len(again) == 1 and again != remembered


@pytest.fixture(scope="module")
def crashing_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableServer]:
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.app.widget_host.settings",
        "ZETT_BROWSER_TOOL_TIMEOUT": "600",
    }
    model = "tests.app.browser.browser_model:browser_script_model"
    server = RestartableServer(tmp_path_factory.mktemp("crash"), "widget-crash", model, env)
    server.start()
    yield server
    server.stop()


def test_a_host_page_call_outlives_a_server_crash_and_the_next_page_answers_it(
    page: Page, crashing_host: RestartableServer, probe: PageProbe
) -> None:
    page.goto(f"{crashing_host.url}/?notools")  # this page cannot run the tool
    chat = widget(page)
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    send_in(chat, "highlight p-7")
    card = chat.locator(".tool-card").last
    expect(card).to_contain_text("highlight_product")
    expect(card).to_have_attribute("data-state", "waiting")
    crashing_host.kill()  # SIGKILL while the run waits for a page
    expect(chat.locator(".connection")).to_have_attribute("data-state", "waiting")
    crashing_host.start()
    page.goto(f"{crashing_host.url}/")  # a page that can: it finds the call pending
    chat = widget(page)
    expect(page.locator('.product[data-product="p-7"]')).to_have_attribute("data-highlighted", "")
    expect(chat.locator(".msg--assistant").last).to_contain_text(
        "The page said: highlighted Red shoes"
    )
    expect(chat.locator(".widget")).to_have_count(0)  # nothing was asked of the person
    # Chromium logged the first page's refused attempts while the server was down.
    probe.forgive("net::ERR_CONNECTION_REFUSED")


def test_a_file_picked_in_the_widget_is_uploaded_sent_and_shown_after_a_reload(
    page: Page, widget_host: LiveServer
) -> None:
    page.goto(f"{widget_host.url}/")
    chat = widget(page)
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    expect(chat.get_by_role("button", name="Attach files")).to_be_visible()
    chat.locator("input.attachments__picker").set_input_files(
        {"name": "shoe.png", "mimeType": "image/png", "buffer": image_bytes("PNG", (40, 30))}
    )
    file_chip = chat.locator(".attachment--chip", has_text="shoe.png")
    # Uploaded with the token the tag gave: a missing one would be refused (403).
    expect(file_chip).to_have_attribute("data-state", "ready")
    send_in(chat, "What is this?")
    expect(chat.locator(".msg--assistant")).to_have_count(1)  # answered
    expect_idle_in(chat)
    expect(chat.locator(".attachment--chip")).to_have_count(0)
    shown = chat.locator(".msg--user .attachments--message img")
    expect(shown).to_have_attribute("alt", "shoe.png")
    page.reload()
    expect(widget(page).locator(".msg--user .attachments--message img")).to_have_attribute(
        "alt", "shoe.png"
    )
