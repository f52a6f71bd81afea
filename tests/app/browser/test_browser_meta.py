"""When each message was written and what each answer cost.

A message carries the time the server stored it (`run_started` and history items:
`created_at`); an answer seen live the time the page saw it end, one from history its
stored `created_at`. Each answer shows
its token usage (live: `model_completed`'s `response.usage`; history: the item's `usage`)
and the composer the chat's total. The scripted model reports 1,200 input and 34 output
tokens per model call.
"""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    EVERY_LAYOUT,
    LiveServer,
    PageProbe,
    SocketGate,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
STORED_AT = "2024-03-05T09:07:00+00:00"


@EVERY_LAYOUT
def test_messages_show_when_they_were_written_and_stay_fresh(
    page: Page, scripted_server: LiveServer
) -> None:
    page.clock.install()
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)

    sent = page.locator(".msg--user time.msg__time")
    answered = page.locator(".turn__meta time.turn__time")
    for time in (sent, answered):
        expect(time).to_have_text("just now")
        expect(time).to_have_attribute("datetime", ISO_UTC)
        expect(time).to_have_attribute("title", re.compile(r"\d{4} at \d{1,2}:\d\d:\d\d\s[AP]M$"))

    page.clock.fast_forward("05:00")
    expect(sent).to_have_text("5 minutes ago")
    expect(answered).to_have_text("5 minutes ago")

    page.clock.fast_forward("02:00:00")
    expect(sent).to_have_text("2 hours ago")
    expect(answered).to_have_text("2 hours ago")


@EVERY_LAYOUT
def test_each_answer_shows_its_token_usage_and_the_chat_its_total(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    total = page.locator("#session-usage")
    expect(total).to_be_hidden()

    send(page, "hello")
    expect_idle(page)
    usage = page.locator(".turn__usage")
    expect(usage).to_have_text(["1,234 tokens"])
    expect(usage).to_have_attribute("title", "1,200 in, 34 out")
    expect(total).to_have_text("This chat: 1,234 tokens")

    send(page, "markdown")
    expect_idle(page)
    expect(usage).to_have_text(["1,234 tokens", "1,234 tokens"])
    expect(total).to_have_text("This chat: 2,468 tokens")
    expect(total).to_be_visible()


def with_stored_fields(frame: dict) -> dict:
    """The `session` frame with a fixed time on every item, the usage of a long answer (and
    so of the chat), and that answer stopped part way (as the server sends a stopped run's
    answer)."""
    if frame.get("type") != "session":
        return frame
    for item in frame["history"]:
        item["created_at"] = STORED_AT
        if item["role"] == "assistant":
            item["usage"] = {"input_tokens": 4000, "output_tokens": 1000, "total_tokens": 5000}
            item["content"] = "Try *what is 12"
            item["partial"] = True
    for run in frame["runs"]:
        run["status"] = "cancelled"
    frame["usage"] = {"input_tokens": 4000, "output_tokens": 1000, "total_tokens": 5000}
    return frame


@EVERY_LAYOUT
def test_history_shows_stored_times_usage_and_stopped_answers(
    page: Page, scripted_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)

    gate.rewrite = with_stored_fields
    page.reload()

    expect(page.locator("#connection-label")).to_have_text("Connected")
    sent = page.locator(".msg--user time.msg__time")
    expect(sent).to_have_attribute("datetime", "2024-03-05T09:07:00.000Z")
    expect(sent).to_have_text("Mar 5, 2024")
    expect(sent).to_have_attribute("title", re.compile(r"^Tuesday, March 5, 2024 at 9:07:00\sAM$"))
    expect(page.locator(".turn__meta time")).to_have_attribute(
        "datetime", "2024-03-05T09:07:00.000Z"
    )
    expect(page.locator(".turn__usage")).to_have_text("5,000 tokens")
    expect(page.locator(".turn__usage")).to_have_attribute("title", "4,000 in, 1,000 out")
    expect(page.locator("#session-usage")).to_have_text("This chat: 5,000 tokens")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")
    expect(page.locator(".note", has_text="Stopped.")).to_be_visible()


def test_a_message_shows_the_time_the_server_stored_live_and_after_a_reload(
    page: Page, scripted_server: LiveServer, probe: PageProbe
) -> None:
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)
    (started,) = [frame for frame in probe.frames if frame["type"] == "run_started"]
    stored = started["created_at"].replace("Z", "+00:00")
    stored_ms = datetime.fromisoformat(stored).isoformat(timespec="milliseconds")
    stored_iso = stored_ms.replace("+00:00", "Z")
    expect(page.locator(".msg--user time")).to_have_attribute("datetime", stored_iso)

    page.reload()

    expect(page.locator("#connection-label")).to_have_text("Connected")
    expect(last_answer(page)).to_have_text("A scripted reply.")
    expect(page.locator(".msg--user time")).to_have_attribute("datetime", stored_iso)
    expect(page.get_by_role("button", name="Copy answer")).to_be_visible()
