"""Deadlines and long chats, on ``tight_server``: questions and approvals expire after a few
seconds there, and the ``session`` frame brings only the newest few messages.

- A question shows a countdown; when nobody answers in time it reads "Nobody answered in
  time", also after a reload. A reply that reaches the server too late says why it was not
  used (the tab that sends it was kept from seeing the expiry, as a tab whose computer slept
  would be).
- Older messages are loaded as the user scrolls up, and the part of the conversation in view
  stays where it was while they are inserted above it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    TIGHT_HISTORY_PAGE,
    LiveServer,
    SocketGate,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    transcript_snapshot,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

COUNTDOWN = re.compile(r"^0:0[1-6]$")


def test_a_question_counts_down_and_reads_expired_then_and_after_a_reload(
    page: Page, tight_server: LiveServer
) -> None:
    open_new_chat(page, tight_server)
    send(page, "Save a note")
    question = page.locator(".widget--ask")
    countdown = question.locator(".widget__deadline time")
    expect(countdown).to_have_text(COUNTDOWN)
    first = countdown.text_content()
    expect(countdown).not_to_have_text(first)  # it counts
    expect(question.locator(".widget__deadline")).to_contain_text("Answer within 0:0")

    expect(question).to_have_attribute("data-state", "expired")
    expect(question.locator(".widget__status")).to_have_text("Nobody answered in time.")
    expect(question.locator(".widget__deadline")).to_have_count(0)
    expect(last_answer(page)).to_contain_text("I could not ask you")
    expect_idle(page)
    before = transcript_snapshot(page)
    assert "widget [expired] What should the note say? -> Nobody answered in time." in before

    page.reload()

    expect_connected(page)
    assert transcript_snapshot(page) == before


def far_deadline(frame: dict) -> dict:
    """Show this tab a deadline an hour away, whatever the server said."""
    if frame.get("type") == "agent_event" and frame["event"]["type"] == "custom":
        later = datetime.now(UTC) + timedelta(hours=1)
        frame["event"]["payload"]["expires_at"] = later.isoformat()
    return frame


def test_a_reply_that_comes_too_late_says_why_it_was_not_used(
    page: Page, tight_server: LiveServer
) -> None:
    gate = SocketGate(page)
    gate.rewrite = far_deadline
    open_new_chat(page, tight_server)
    send(page, "Save a note")
    question = page.locator(".widget--ask")
    expect(question.locator(".widget__deadline time")).to_have_text(re.compile(r"^an hour"))
    # This tab sees nothing more of the run: it slept through the deadline.
    gate.hold("agent_event", "run_failed", "run_cancelled", "reply_accepted")

    other = page.context.new_page()
    other.goto(page.url)
    expect(other.locator(".widget--ask")).to_have_attribute("data-state", "expired")
    expect_idle(other)
    other.close()

    question.get_by_label("Your answer").fill("Buy milk")
    question.get_by_role("button", name="Send answer").click()

    expect(question).to_have_attribute("data-state", "rejected")
    expect(question.locator(".widget__status")).to_have_text(
        "Too late: nobody answered in time, so this answer was not used."
    )
    results = [frame for frame in gate.seen if frame["type"] == "external_event_result"]
    assert [(frame["accepted_by"], frame["reason"]) for frame in results] == [([], "expired")]


def test_older_messages_load_on_scrolling_up_and_the_place_in_view_stays(
    page: Page, tight_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, tight_server)
    # 4 + 4 + 2 messages: the newest page starts inside the second answer.
    for message in ("What is 1 + 1?", "What is 2 + 2?", "thanks"):
        send(page, message)
        expect_idle(page)
    expect(page.locator(".turn__meta")).to_have_count(3)
    before = transcript_snapshot(page)

    gate.hold("history_page")
    # Short enough that what the session frame brings fills more than the screen.
    page.set_viewport_size({"width": 1280, "height": 480})
    page.reload()

    expect_connected(page)
    earlier = page.get_by_role("button", name=re.compile("earlier messages"))
    expect(earlier).to_be_visible()
    sessions = [frame for frame in gate.seen if frame["type"] == "session"]
    assert len(sessions[-1]["history"]) == TIGHT_HISTORY_PAGE
    assert sessions[-1]["has_more_history"] is True
    expect(page.locator(".msg--user .msg__body")).to_have_text(["thanks"])
    transcript = page.locator("#transcript")
    transcript.evaluate("node => { node.scrollTop = 0; }")
    expect(earlier).to_have_text("Loading earlier messages…")
    assert gate.sent[-1] == {"type": "history_before", "position": 6, "limit": 50}
    anchor = page.locator(".msg--user", has_text="thanks")
    top = anchor.evaluate("node => node.getBoundingClientRect().top")

    gate.release()

    expect(page.locator(".msg--user .msg__body")).to_have_text(
        ["What is 1 + 1?", "What is 2 + 2?", "thanks"]
    )
    assert abs(anchor.evaluate("node => node.getBoundingClientRect().top") - top) < 1
    expect(earlier).to_be_hidden()
    assert transcript_snapshot(page) == before
    expect(page.locator(".tool-card")).to_have_count(2)
