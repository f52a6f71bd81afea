"""Nothing the user typed is lost: Retry after a failed answer, and text the server refused
(or that could not be sent) goes back into the composer.

`busy` comes from the real server: a second window that has not seen the first window's
run (its frames are withheld by the test) sends a message while that run waits. The
`rate_limited` refusals are sent in the server's place by ``SocketGate``, in the shape
docs/protocol.md gives them.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_model import RECOVERED_REPLY
from tests.app.browser.browser_support import (
    EVERY_LAYOUT,
    LiveServer,
    SocketGate,
    composer,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


@EVERY_LAYOUT
def test_retry_after_a_failed_answer_sends_the_same_message_again(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "fail once")

    failure = page.locator(".note--error")
    expect(failure).to_contain_text("The answer failed: The model service is unavailable")
    expect_idle(page)
    failure.get_by_role("button", name="Retry").click()

    # The failed turn is answered again in its place (regenerate), not asked twice.
    expect(last_answer(page)).to_have_text(RECOVERED_REPLY)
    expect(page.locator(".msg--user .msg__body")).to_have_text(["fail once"])
    expect(page.locator(".note--error")).to_have_count(0)
    expect(composer(page)).to_be_focused()
    expect_idle(page)


def refuse(code: str, frame_type: str):
    """A gate answer: refuse frames of ``frame_type`` with ``code``, as the server does."""

    def answer(frame: dict) -> dict | None:
        if frame["type"] != frame_type:
            return None
        return {"type": "error", "code": code, "message": f"refused by the test ({code})"}

    return answer


@EVERY_LAYOUT
def test_a_rate_limited_message_goes_back_into_the_composer(
    page: Page, daphne_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, daphne_server)
    gate.answer = refuse("rate_limited", "user_message")

    send(page, "What is 6 * 7?")

    expect(page.locator(".notice")).to_contain_text("You are sending messages too quickly.")
    expect(composer(page)).to_have_value("What is 6 * 7?")
    expect(page.locator("#composer-hint")).to_have_text(
        "Your message was not sent; it is back in the box."
    )
    expect(page.locator(".msg--user")).to_have_count(0)
    expect(page.locator(".turn")).to_have_count(0)
    expect_idle(page)

    gate.answer = lambda frame: None
    composer(page).press("Enter")
    expect(last_answer(page).locator("strong")).to_have_text("42")
    expect(page.locator(".msg--user .msg__body")).to_have_text(["What is 6 * 7?"])


@EVERY_LAYOUT
def test_a_rate_limited_steer_goes_back_into_the_composer(
    page: Page, daphne_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, daphne_server)
    send(page, "Save a note")
    expect(page.locator(".widget--ask")).to_contain_text("What should the note say?")
    gate.answer = refuse("rate_limited", "steer")

    steer = page.get_by_label("Steer the answer")
    steer.fill("Make it about coffee")
    steer.press("Enter")

    expect(steer).to_have_value("Make it about coffee")
    expect(page.locator("#composer-hint")).to_have_text(
        "Your steer was not used; it is back in the box."
    )
    expect(page.locator(".msg--steer")).to_have_count(0)
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    page.get_by_role("button", name="Stop").click()
    expect_idle(page)


@EVERY_LAYOUT
def test_a_message_refused_as_busy_goes_back_into_the_composer(
    page: Page, daphne_server: LiveServer
) -> None:
    # Another window of the same browser, which starts a run.
    first = page.context.new_page()
    try:
        open_new_chat(first, daphne_server)
        send(first, "Save a note")
        expect(first.locator(".widget--ask")).to_contain_text("What should the note say?")

        # This window misses the run: it is told nothing runs and sees none of its frames.
        def hide_the_run(frame: dict) -> dict | None:
            if frame["type"] == "session":
                return {**frame, "active_request_id": None}
            return None if "seq" in frame else frame

        gate = SocketGate(page)
        gate.rewrite = hide_the_run
        page.goto(first.url)
        expect(page.locator("#connection-label")).to_have_text("Connected")
        expect_idle(page)

        send(page, "What is 2 + 2?")

        expect(page.locator(".notice")).to_contain_text("The agent is still answering.")
        expect(composer(page)).to_have_value("What is 2 + 2?")
        expect(page.locator(".msg--user", has_text="What is 2 + 2?")).to_have_count(0)
        expect_idle(page)
        sent = [frame["type"] for frame in gate.sent if frame["type"] != "ping"]
        assert sent == ["user_message"]
    finally:
        first.close()
