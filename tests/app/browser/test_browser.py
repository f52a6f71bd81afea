"""The chat page in a real headless Chromium against the real ASGI app on Daphne: the core
flows (streaming, tools, questions and approvals, stop, steer, reload, reconnect, errors).

Fixtures and helpers are shared by every browser test file (``browser_support.py``): one
Chromium and two live servers, the offline demo model and the scripted LLM of
``browser_model.py``. Every wait is on a condition (Playwright's ``expect`` and locators),
never a sleep. With ``ZETT_UPDATE_SCREENSHOT=1`` the approval flow also refreshes
``docs/screenshot.png``.
"""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.app.browser.browser_support import (
    LAYOUTS,
    ROOT,
    TRACK_SOCKETS,
    LiveServer,
    PageProbe,
    drop_socket,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    wait_for_value,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


# --- tests -------------------------------------------------------------------------------


def test_a_new_chat_streams_an_answer_computed_by_the_calculator(
    page: Page, daphne_server: LiveServer, probe: PageProbe
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "What is 12 * (3 + 4) / 5?")

    expect(page.locator(".msg--user").last).to_contain_text("What is 12 * (3 + 4) / 5?")
    expect(last_answer(page).locator("strong")).to_have_text("16.8")
    expect(last_answer(page).locator("code")).to_have_text("12 * (3 + 4) / 5")
    expect_idle(page)
    assert len(probe.frames_of("text_delta")) > 2, "the answer arrived in one piece"

    card = page.locator(".tool-card", has_text="calculate")
    expect(card).to_have_attribute("data-state", "done")
    card.locator("summary").click()
    arguments = card.locator(".tool-card__code").first
    expect(arguments).to_contain_text('"expression": "12 * (3 + 4) / 5"')
    expect(card.locator(".tool-card__result")).to_have_text("16.8")


def test_answering_the_question_and_approving_the_note_saves_it(
    page: Page, daphne_server: LiveServer
) -> None:
    session_id = open_new_chat(page, daphne_server)
    send(page, "Save a note")

    question = page.locator(".widget--ask")
    expect(question).to_contain_text("What should the note say?")
    expect(question.get_by_label("Your answer")).to_be_focused()
    page.keyboard.type("Buy oat milk and coffee")
    page.keyboard.press("Enter")
    expect(question.locator(".widget__status")).to_have_text(
        "You answered: Buy oat milk and coffee"
    )

    approval = page.locator(".widget--approval")
    expect(approval).to_contain_text("Allow save_note to run with these arguments?")
    expect(approval.locator(".widget__arguments")).to_contain_text("Buy oat milk and coffee")
    expect(approval.get_by_role("button", name="Approve")).to_be_focused()
    page.keyboard.press("Enter")
    expect(approval.locator(".widget__status")).to_have_text("You approved this.")

    expect(last_answer(page)).to_contain_text("Saved note")
    expect(page.locator(".tool-card", has_text="save_note")).to_have_attribute("data-state", "done")
    expect_idle(page)
    notes = daphne_server.rows(
        "SELECT text FROM agent_app_note WHERE session_id = ?", session_id.replace("-", "")
    )
    assert notes == [("Buy oat milk and coffee",)]

    if os.environ.get("ZETT_UPDATE_SCREENSHOT") == "1":
        page.set_viewport_size({"width": 1280, "height": 900})
        expect(page.get_by_role("heading", name="Save a note")).to_be_visible()
        page.screenshot(path=str(ROOT / "docs" / "screenshot.png"))


def test_denying_the_note_leaves_no_row(page: Page, daphne_server: LiveServer) -> None:
    session_id = open_new_chat(page, daphne_server)
    send(page, "Save a note: call the plumber")

    approval = page.locator(".widget--approval")
    approval.get_by_role("button", name="Deny").click()
    expect(approval.locator(".widget__status")).to_have_text("You denied this.")

    expect(last_answer(page)).to_contain_text("I did not save the note.")
    card = page.locator(".tool-card", has_text="save_note")
    expect(card).to_have_attribute("data-state", "denied")
    expect(card.locator(".tool-card__status")).to_have_text("denied")
    expect_idle(page)
    notes = daphne_server.rows(
        "SELECT text FROM agent_app_note WHERE session_id = ?", session_id.replace("-", "")
    )
    assert notes == []


def test_choosing_an_offered_option_answers_the_question(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "help")

    question = page.locator(".widget--ask")
    expect(question).to_contain_text("What would you like to try?")
    question.get_by_role("button", name="The current time").click()

    expect(question.locator(".widget__status")).to_have_text("You answered: The current time")
    expect(last_answer(page)).to_contain_text("what time is it in Asia/Tokyo?")
    expect_idle(page)


def test_stop_cancels_a_run_that_waits_for_an_answer(page: Page, daphne_server: LiveServer) -> None:
    open_new_chat(page, daphne_server)
    send(page, "Save a note")
    question = page.locator(".widget--ask")
    expect(question).to_contain_text("What should the note say?")

    page.get_by_role("button", name="Stop").click()

    expect(page.locator(".note", has_text="Stopped.")).to_be_visible()
    expect(question).to_have_attribute("data-state", "stopped")
    expect(question.locator(".widget__status")).to_have_text("Stopped before anyone answered.")
    expect(question.get_by_label("Your answer")).to_be_disabled()
    card = page.locator(".tool-card", has_text="ask_user")
    expect(card).to_have_attribute("data-state", "stopped")
    expect_idle(page)


def test_reloading_the_page_rebuilds_the_conversation_from_history(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "What is 2**10?")
    expect(last_answer(page).locator("strong")).to_have_text("1024")
    expect_idle(page)

    page.reload()

    expect(page.locator("#connection-label")).to_have_text("Connected")
    expect(page.locator(".msg--user .msg__body")).to_have_text(["What is 2**10?"])
    expect(page.locator(".tool-card", has_text="calculate")).to_have_attribute("data-state", "done")
    expect(last_answer(page).locator("strong")).to_have_text("1024")


def test_markup_in_the_conversation_is_shown_as_text_and_never_runs(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    markup = '<img src=x onerror="window.zettInjected=1"><b>bold</b>'
    send(page, f"Save a note: {markup}")
    page.locator(".widget--approval").get_by_role("button", name="Approve").click()

    expect(last_answer(page)).to_contain_text("Saved note")
    expect(last_answer(page)).to_contain_text("<b>bold</b>")
    expect(page.locator(".msg--user").last).to_contain_text(markup)
    assert page.locator("#transcript img").count() == 0
    assert page.locator("#transcript b").count() == 0
    assert page.evaluate("window.zettInjected") is None


def test_the_session_list_shows_chats_and_marks_the_open_one(
    page: Page, daphne_server: LiveServer
) -> None:
    session_id = open_new_chat(page, daphne_server)
    send(page, "What is 1/3 + 1/6?")
    expect_idle(page)

    current = page.get_by_role("navigation", name="Chats").locator("a[aria-current=page]")
    expect(current).to_have_attribute("href", f"/s/{session_id}/")

    page.goto(f"{daphne_server.url}/")
    expect(page.get_by_role("heading", name="Recent chats")).to_be_visible()
    expect(page.locator(f'a[href="/s/{session_id}/"]')).to_be_visible()


@pytest.mark.parametrize(
    "page", [LAYOUTS["narrow-light"], LAYOUTS["narrow-dark"]], ids=["light", "dark"], indirect=True
)
def test_on_a_narrow_screen_the_chat_list_is_a_drawer(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    sidebar = page.get_by_role("navigation", name="Chats")
    toggle = page.get_by_role("button", name="Chats")
    expect(sidebar).to_be_hidden()

    toggle.click()
    expect(sidebar).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")

    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()

    send(page, "What is 6 * 7?")
    expect(last_answer(page).locator("strong")).to_have_text("42")


def test_after_the_link_drops_an_idle_page_reconnects_and_keeps_its_conversation(
    page: Page, daphne_server: LiveServer, probe: PageProbe
) -> None:
    page.add_init_script(TRACK_SOCKETS)
    open_new_chat(page, daphne_server)
    send(page, "What is 2**16?")
    expect(last_answer(page).locator("strong")).to_have_text("65536")
    expect_idle(page)
    page.evaluate("document.querySelector('#transcript > .turn').dataset.before = 'drop'")
    seen = max(frame["seq"] for frame in probe.frames if "seq" in frame)

    drop_socket(page)

    wait_for_value(page, "window.zettSockets.length", 2)
    expect(page.locator("#connection-label")).to_have_text("Connected")
    assert page.evaluate("window.zettSockets[1].url").endswith(f"?after_seq={seen}")
    # Nothing happened meanwhile, so nothing was rebuilt.
    expect(page.locator("#transcript [data-before]")).to_have_count(1)
    expect(page.locator(".msg--user .msg__body")).to_have_text(["What is 2**16?"])
    send(page, "What is 6 * 7?")
    expect(last_answer(page).locator("strong")).to_have_text("42")


def test_after_the_link_drops_mid_question_the_same_run_goes_on_and_can_be_answered(
    page: Page, daphne_server: LiveServer, probe: PageProbe
) -> None:
    page.add_init_script(TRACK_SOCKETS)
    session_id = open_new_chat(page, daphne_server)
    send(page, "Save a note")
    question = page.locator(".widget--ask")
    expect(question).to_contain_text("What should the note say?")

    drop_socket(page)

    wait_for_value(page, "window.zettSockets.length", 2)
    expect(page.locator("#connection-label")).to_have_text("Connected")
    assert "after_seq=" in page.evaluate("window.zettSockets.at(-1).url")
    expect(question).to_have_attribute("data-state", "open")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    question.get_by_label("Your answer").fill("Buy oat milk")
    question.get_by_role("button", name="Send answer").click()
    approval = page.locator(".widget--approval")
    approval.get_by_role("button", name="Approve").click()
    expect(last_answer(page)).to_contain_text("Saved note")
    expect_idle(page)
    expect(page.locator(".widget--ask")).to_have_count(1)
    notes = daphne_server.rows(
        "SELECT text FROM agent_app_note WHERE session_id = ?", session_id.replace("-", "")
    )
    assert notes == [("Buy oat milk",)]


def test_steering_while_the_agent_waits_redirects_the_next_answer(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "Save a note")
    question = page.locator(".widget--ask")
    expect(question).to_contain_text("What should the note say?")

    steer = page.get_by_label("Steer the answer")
    steer.fill("What is 6 * 7?")
    steer.press("Enter")
    expect(page.locator("#composer-hint")).to_have_text("Steer sent.")
    question.get_by_label("Your answer").fill("Buy milk")
    question.get_by_role("button", name="Send answer").click()

    steered = page.locator(".msg--steer")
    expect(steered.locator(".msg__body")).to_have_text("What is 6 * 7?")
    expect(last_answer(page).locator("strong")).to_have_text("42")
    expect_idle(page)


def test_an_error_frame_becomes_a_dismissable_notice(page: Page, daphne_server: LiveServer) -> None:
    page.add_init_script(TRACK_SOCKETS)
    open_new_chat(page, daphne_server)

    page.evaluate("window.zettSockets.at(-1).send('this is not JSON')")

    notice = page.locator(".notice")
    expect(notice).to_contain_text("The server could not read a message from this page.")
    notice.get_by_role("button", name=re.compile("^Dismiss")).click()
    expect(notice).to_have_count(0)
    expect(page.locator("#connection-label")).to_have_text("Connected")


def test_a_message_over_the_size_limit_is_kept_and_not_sent(
    page: Page, daphne_server: LiveServer, probe: PageProbe
) -> None:
    open_new_chat(page, daphne_server)
    too_long = "a" * (33 * 1024)

    send(page, too_long)

    expect(page.locator("#composer-hint")).to_have_text(
        "This is 33 KiB; the limit is 32 KiB. Shorten it to send."
    )
    expect(page.get_by_label("Message", exact=True)).to_have_value(too_long)
    expect(page.locator(".msg--user")).to_have_count(0)


def test_a_second_window_follows_the_run_and_can_answer_for_the_first(
    page: Page, browser: Browser, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "Save a note: water the plants")
    first_approval = page.locator(".widget--approval")
    expect(first_approval).to_be_visible()

    # A second window of the same browser: another browser would be someone else (404).
    second = page.context.new_page()
    try:
        second.goto(page.url)
        expect(second.locator("#connection-label")).to_have_text("Connected")
        expect(second.get_by_role("button", name="Stop")).to_be_visible()
        second.get_by_role("button", name="Stop").click()
        expect(second.locator(".note", has_text="Stopped.")).to_be_visible()
        expect_idle(second)
    finally:
        second.close()

    expect(page.locator(".note", has_text="Stopped.")).to_be_visible()
    expect(first_approval).to_have_attribute("data-state", "stopped")
    expect_idle(page)


def test_reasoning_starts_collapsed_and_a_cut_off_answer_says_why(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "cut off")

    expect(last_answer(page)).to_have_text("Here is the first half of a long answer")
    expect(page.locator(".note--warning")).to_have_text(
        "The answer was cut off (it reached the length limit: limit of 12 tokens)."
    )
    reasoning = page.locator("details.reasoning")
    expect(reasoning).to_have_js_property("open", False)
    reasoning.locator("summary").click()
    expect(reasoning.locator(".reasoning__body")).to_have_text(
        "The user wants a long answer; I only have a few tokens left."
    )
    expect_idle(page)


def test_a_failed_run_is_reported_in_the_conversation_which_goes_on(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "fail")

    expect(page.locator(".note--error")).to_contain_text(
        "The answer failed: The model service is unavailable (RuntimeError)."
    )
    expect_idle(page)
    send(page, "hello again")
    expect(last_answer(page)).to_have_text("A scripted reply.")


def test_markdown_from_the_model_renders_with_links_that_open_safely(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "markdown")

    answer = last_answer(page)
    expect(answer.locator("h2")).to_have_text("Shopping list")
    expect(answer.locator("ol > li")).to_have_text(["Oat milk", "Coffee"])
    expect(answer.locator("pre code")).to_have_text("brew --strong\n")
    expect(answer.locator("td")).to_have_text(["cups", "2"])
    link = answer.get_by_role("link", name="the docs")
    expect(link).to_have_attribute("href", "https://example.org/coffee")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", re.compile(r"\bnoopener\b"))
