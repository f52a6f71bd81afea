"""States that say what happened: a Stop pressed while the link is down is kept and sent
when it is back (never lost while the page says nothing), a deleted chat's page says it was
deleted and offers no composer, and error pages are styled without breaking the page's
Content Security Policy.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LiveServer,
    PageProbe,
    SocketGate,
    axe_violations,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    reconnect_now,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


def test_a_stop_pressed_offline_is_sent_when_the_link_is_back(
    page: Page, scripted_server: LiveServer, probe: PageProbe
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, scripted_server)
    send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")
    gate.block()
    gate.drop()
    expect(page.locator("#connection-label")).not_to_have_text("Connected")

    stop = page.locator("#stop-button")
    stop.click()

    expect(stop).to_have_text("Stop on reconnect (press to undo)")
    expect(
        page.locator(".notice", has_text="the answer stops as soon as the link is back")
    ).to_be_visible()
    assert axe_violations(page) == []
    assert not [frame for frame in gate.sent if frame["type"] == "cancel"]
    gate.unblock()
    reconnect_now(page)

    expect_connected(page)
    expect(page.locator(".note", has_text="Stopped.")).to_be_visible()
    expect_idle(page)
    assert [frame["type"] for frame in gate.sent].count("cancel") == 1
    expect(page.locator(".notice", has_text="the answer stops")).to_have_count(0)


def test_a_stop_pressed_offline_can_be_taken_back(page: Page, scripted_server: LiveServer) -> None:
    gate = SocketGate(page)
    open_new_chat(page, scripted_server)
    send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")
    gate.block()
    gate.drop()
    stop = page.locator("#stop-button")
    stop.click()
    expect(stop).to_have_text("Stop on reconnect (press to undo)")

    stop.click()

    expect(stop).to_have_text("Stop")
    gate.unblock()
    reconnect_now(page)
    expect_connected(page)
    expect(last_answer(page)).to_have_class("msg msg--assistant markdown is-streaming")
    expect(stop).to_be_visible()
    assert not [frame for frame in gate.sent if frame["type"] == "cancel"]
    stop.click()
    expect_idle(page)


def test_a_chat_deleted_in_another_tab_says_so_and_keeps_the_typed_text(
    page: Page, scripted_server: LiveServer, probe: PageProbe
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)
    other = page.context.new_page()
    other.on("pageerror", lambda error: probe.errors.append(f"second tab: {error}"))
    other.goto(page.url)
    expect_connected(other)
    page.get_by_label("Message", exact=True).fill("one more thing")

    other.get_by_role("button", name="Delete this chat").click()
    other.get_by_role("dialog").get_by_role("button", name="Delete").click()

    gone = page.locator(".chat-gone")
    expect(gone).to_contain_text("This chat was deleted.")
    expect(gone.locator("blockquote")).to_have_text("one more thing")
    expect(page.locator("#composer")).to_be_hidden()
    expect(page.get_by_role("button", name="Regenerate")).to_have_count(0)
    expect(page.locator(".last-action:visible")).to_have_count(0)
    expect(page.get_by_text("code 4410")).to_have_count(0)
    assert axe_violations(page) == []
    gone.get_by_role("link", name="Go to your chats").click()
    expect(page).to_have_url(f"{scripted_server.url}/")
    other.close()


def test_a_deleted_chats_address_says_it_was_deleted(
    page: Page, scripted_server: LiveServer, probe: PageProbe
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)
    address = page.url
    page.get_by_role("button", name="Delete this chat").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page).to_have_url(f"{scripted_server.url}/")

    response = page.goto(address)

    assert response is not None and response.status == 410
    probe.forgive("status of 410 (Gone)")  # the browser logs every error status
    expect(page.get_by_role("heading", name="This chat was deleted")).to_be_visible()
    expect(page.locator("#composer")).to_have_count(0)
    assert axe_violations(page) == []
    page.get_by_role("link", name="Start a new chat").click()
    expect(page.locator("#connection-label")).to_have_text("Connected")


def test_the_debug_not_found_page_is_styled_and_breaks_no_policy(
    page: Page, scripted_server: LiveServer, probe: PageProbe
) -> None:
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text))

    response = page.goto(f"{scripted_server.url}/no-such-page/")

    assert response is not None and response.status == 404
    summary = page.locator("#summary")
    expect(summary).to_be_visible()
    background = summary.evaluate("node => getComputedStyle(node).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")  # its inline <style> applied
    assert not [text for text in violations if "Content Security Policy" in text]
    probe.forgive("status of 404 (Not Found)")


def test_a_steer_while_a_tool_waits_says_when_it_will_be_read(
    page: Page, scripted_server: LiveServer
) -> None:
    """A tool is never cut short: a steer sent while one waits for an approval says when
    it will be read, never "Queued" (one sent while text is written applies at once:
    ``test_browser_steering``)."""
    open_new_chat(page, scripted_server)
    send(page, "note Buy milk")
    expect(page.locator(".widget--approval")).to_be_visible()
    box = page.get_by_label("Steer the answer")
    box.fill("Shorter, please")
    box.press("Enter")

    steer = page.locator(".msg--steer")
    expect(steer).to_have_attribute("data-steer", "queued")
    expect(steer.locator(".msg__tag")).to_have_text("Will be read after your answer above")
    expect(page.get_by_text("Queued")).to_have_count(0)
    assert axe_violations(page) == []
    page.get_by_role("button", name="Stop").click()
    expect(steer).to_have_attribute("data-steer", "discarded")
    expect_idle(page)
