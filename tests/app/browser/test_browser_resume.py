"""A run belongs to the chat, not to the page: a reload mid-answer or while an approval waits
picks the same run up again (the server replays its frames), and every tab of the chat sees
every message, answer, steer and stop, whichever tab did it.

The second tab is a page of the same browser context (the same cookies), as a user's second
tab would be.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LiveServer,
    PageProbe,
    SocketGate,
    composer,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    transcript_snapshot,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


def second_tab(page: Page, probe: PageProbe) -> Page:
    """Another tab on the same chat, whose script errors fail the test too."""
    other = page.context.new_page()
    other.on("pageerror", lambda error: probe.errors.append(f"second tab: {error}"))
    other.goto(page.url)
    expect_connected(other)
    return other


def test_a_reload_mid_answer_rebuilds_the_answer_which_can_still_be_stopped(
    page: Page, scripted_server: LiveServer, probe: PageProbe
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")

    page.reload()

    expect_connected(page)
    expect(page.locator(".msg--user .msg__body")).to_have_text(["stall"])
    expect(last_answer(page)).to_have_class("msg msg--assistant markdown is-streaming")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")
    sessions = [frame for frame in probe.frames if frame["type"] == "session"]
    assert sessions[-1]["active_request_id"] is not None
    page.get_by_role("button", name="Stop").click()

    expect(page.locator(".note", has_text="Stopped.")).to_be_visible()
    expect(last_answer(page)).to_have_class("msg msg--assistant markdown is-stopped")
    expect_idle(page)


def test_a_reload_while_an_approval_waits_brings_it_back_and_approving_completes_the_run(
    page: Page, daphne_server: LiveServer
) -> None:
    session_id = open_new_chat(page, daphne_server)
    send(page, "Save a note: water the plants")
    expect(page.locator(".widget--approval")).to_be_visible()

    page.reload()

    expect_connected(page)
    approval = page.locator(".widget--approval")
    expect(approval).to_have_attribute("data-state", "open")
    expect(approval.locator(".widget__arguments")).to_contain_text("water the plants")
    expect(page.locator(".tool-card", has_text="save_note")).to_have_attribute(
        "data-state", "waiting"
    )
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    approval.get_by_role("button", name="Approve").click()

    expect(approval.locator(".widget__status")).to_have_text("You approved this.")
    expect(last_answer(page)).to_contain_text("Saved note")
    expect_idle(page)
    notes = daphne_server.rows(
        "SELECT text FROM agent_app_note WHERE session_id = ?", session_id.replace("-", "")
    )
    assert notes == [("water the plants",)]


def test_two_tabs_see_each_others_messages_and_answers(
    page: Page, daphne_server: LiveServer, probe: PageProbe
) -> None:
    open_new_chat(page, daphne_server)
    other = second_tab(page, probe)

    send(page, "Save a note")
    expect(other.locator(".msg--user .msg__body")).to_have_text(["Save a note"])
    question = other.locator(".widget--ask")
    expect(question).to_contain_text("What should the note say?")
    question.get_by_label("Your answer").fill("Buy oat milk")
    question.get_by_role("button", name="Send answer").click()

    expect(page.locator(".widget--ask .widget__status")).to_have_text("You answered: Buy oat milk")
    page.locator(".widget--approval").get_by_role("button", name="Approve").click()
    expect(other.locator(".widget--approval .widget__status")).to_have_text("You approved this.")
    expect(last_answer(other)).to_contain_text("Saved note")
    expect_idle(other)
    expect_idle(page)

    send(other, "What is 6 * 7?")
    expect(page.locator(".msg--user .msg__body")).to_have_text(["Save a note", "What is 6 * 7?"])
    expect(last_answer(page).locator("strong")).to_have_text("42")
    expect(last_answer(other).locator("strong")).to_have_text("42")
    expect_idle(page)
    expect_idle(other)
    assert transcript_snapshot(page) == transcript_snapshot(other)
    other.close()


def test_a_steer_shows_waiting_in_every_tab_and_a_stop_discards_it_everywhere(
    page: Page, daphne_server: LiveServer, probe: PageProbe
) -> None:
    open_new_chat(page, daphne_server)
    other = second_tab(page, probe)
    send(page, "Save a note")
    expect(page.locator(".widget--ask")).to_contain_text("What should the note say?")

    box = page.get_by_label("Steer the answer")
    box.fill("Make it about coffee")
    box.press("Enter")

    for tab in (page, other):
        steer = tab.locator(".msg--steer")
        expect(steer).to_have_attribute("data-steer", "queued")
        expect(steer.locator(".msg__tag")).to_have_text("Will be read after your answer above")
        expect(steer.locator(".msg__body")).to_have_text("Make it about coffee")
    other.get_by_role("button", name="Stop").click()

    for tab in (page, other):
        steer = tab.locator(".msg--steer")
        expect(steer).to_have_attribute("data-steer", "discarded")
        expect(steer.locator(".msg__tag")).to_have_text("Not used: the answer was stopped first.")
        expect(tab.locator(".widget--ask")).to_have_attribute("data-state", "stopped")
        expect(tab.locator(".tool-card", has_text="ask_user")).to_have_attribute(
            "data-state", "stopped"
        )
        expect(tab.locator(".note", has_text="Stopped.")).to_be_visible()
        expect_idle(tab)
    other.close()


def test_a_message_the_dropped_link_lost_comes_back_into_the_composer(
    page: Page, scripted_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)

    def lose_it(frame: dict):
        if frame["type"] != "user_message":
            return None
        gate.answer = lambda frame: None
        gate.drop()
        return SocketGate.SWALLOW

    gate.answer = lose_it
    send(page, "Are you there?")

    expect(composer(page)).to_have_value("Are you there?")
    expect(page.locator("#composer-hint")).to_have_text(
        "Your message was not sent; it is back in the box."
    )
    expect_connected(page)
    expect(page.locator(".msg--user .msg__body")).to_have_text(["hello"])
    expect_idle(page)
    assert [frame["type"] for frame in gate.sent].count("ping") == 2  # one per socket


def test_a_message_that_reached_the_server_before_the_link_dropped_is_shown_once(
    page: Page, scripted_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, scripted_server)
    gate.drop_after = {"user_message"}

    send(page, "hello")

    expect(last_answer(page)).to_have_text("A scripted reply.")
    expect_connected(page)
    expect(page.locator(".msg--user .msg__body")).to_have_text(["hello"])
    expect(composer(page)).to_have_value("")
    expect_idle(page)
    sent = [frame["type"] for frame in gate.sent]
    assert sent.count("user_message") == 1
    assert sent.count("ping") == 2  # one per socket
