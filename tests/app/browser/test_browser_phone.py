"""The chat on a phone: nothing scrolls sideways in any state at 320, 375 and 414 px, Enter
makes a new line on a touch screen (Send sends) while a keyboard's Enter sends, the message
box grows with its text up to a cap, and "Jump to latest" brings back the end of the
conversation after scrolling up.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LiveServer,
    SocketGate,
    composer,
    expect_idle,
    last_answer,
    open_new_chat,
    reconnect_now,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

PHONES = pytest.mark.parametrize(
    "page",
    [{"width": width, "height": 700, "touch": True} for width in (320, 375, 414)],
    ids=["320", "375", "414"],
    indirect=True,
)
PHONE = pytest.mark.parametrize(
    "page", [{"width": 375, "height": 700, "touch": True}], ids=["375"], indirect=True
)


def assert_fits(page: Page, state: str) -> None:
    """Nothing wider than the screen, and every composer button wholly on it."""
    width = page.viewport_size["width"]
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{state}: the page is {scroll} px wide on a {width} px screen"
    for button in page.locator("#composer button:visible").all():
        box = button.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (
            f"{state}: {button.inner_text()!r} sticks out ({box}) of {width} px"
        )


def tap_send(page: Page, text: str) -> None:
    composer(page).fill(text)
    page.locator("#send-button").tap()


@PHONES
def test_no_state_of_the_composer_is_wider_than_a_phone(
    page: Page, scripted_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, scripted_server)
    assert_fits(page, "empty")
    tap_send(page, "hello")
    expect_idle(page)
    expect(page.locator("#session-usage")).to_be_visible()
    assert_fits(page, "answered, with the chat's token count")
    composer(page).fill("x" * 40_000)
    expect(page.locator("#composer-hint")).not_to_be_empty()
    assert_fits(page, "too long")
    tap_send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")
    expect(page.locator("#send-button")).to_have_text("Steer")
    expect(page.locator("#stop-button")).to_be_visible()
    assert_fits(page, "answering")
    composer(page).fill("shorter please")
    assert_fits(page, "steer typed")
    gate.block()
    gate.drop()
    page.locator("#stop-button").tap()
    expect(page.locator("#stop-button")).to_have_text("Stop on reconnect (press to undo)")
    assert_fits(page, "offline stop")
    gate.unblock()
    reconnect_now(page)
    expect_idle(page)
    assert_fits(page, "stopped")


@PHONE
def test_on_a_touch_screen_enter_makes_a_new_line_and_send_sends(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    box = composer(page)
    expect(box).to_have_attribute("enterkeyhint", "enter")
    expect(box).to_have_attribute("placeholder", "Ask something…")
    box.fill("first line")
    box.press("Enter")
    box.type("second line")

    expect(box).to_have_value("first line\nsecond line")
    expect(page.locator(".msg--user")).to_have_count(0)
    page.locator("#send-button").tap()
    expect(page.locator(".msg--user .msg__body")).to_have_text(["first line\nsecond line"])
    expect_idle(page)


def test_with_a_keyboard_enter_sends_and_says_so(page: Page, scripted_server: LiveServer) -> None:
    open_new_chat(page, scripted_server)
    expect(composer(page)).to_have_attribute("enterkeyhint", "send")
    send(page, "hello")
    expect(page.locator(".msg--user .msg__body")).to_have_text(["hello"])


@PHONE
def test_the_message_box_grows_with_its_text_up_to_a_cap(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    box = composer(page)
    empty = box.bounding_box()["height"]
    box.fill("\n".join(f"line {n}" for n in range(5)))
    grown = box.bounding_box()["height"]
    assert grown > empty * 1.5
    box.fill("\n".join(f"line {n}" for n in range(200)))
    capped = box.bounding_box()["height"]
    assert grown < capped <= 700 * 0.4 + 1
    page.locator("#send-button").tap()
    expect(page.locator(".msg--user")).to_have_count(1)
    expect(box).to_have_value("")
    assert box.bounding_box()["height"] == empty


@PHONE
def test_jump_to_latest_appears_when_scrolled_up_and_brings_back_the_end(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    jump = page.get_by_role("button", name="Jump to latest")
    for _ in range(3):
        tap_send(page, "markdown")
        expect_idle(page)
    expect(jump).to_be_hidden()

    page.locator("#transcript").evaluate("node => { node.scrollTop = 0; }")

    expect(jump).to_be_visible()
    jump.tap()
    expect(jump).to_be_hidden()
    expect(last_answer(page)).to_be_in_viewport()
    expect(composer(page)).to_be_focused()
