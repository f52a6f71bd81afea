"""Steering that steers: a steer typed while the answer is being written cuts it short, the
page shows the steer right where it cut in (what was written stays above it) and the rest
of the answer, which follows the steer, streams below; a reload shows the same."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_model import STALLED_TEXT
from tests.app.browser.browser_support import (
    LiveServer,
    axe_violations,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    serve,
    transcript_snapshot,
)
from zett_agent.providers.demo_answers import LONG_ANSWER

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

STEERED_REPLY = "Steered: the short version."


def test_a_steer_during_a_streaming_answer_changes_the_rest_of_that_answer(
    page: Page, scripted_server: LiveServer
) -> None:
    open_new_chat(page, scripted_server)
    # The model writes "Try *what is 12" and would go on for ever: only the steer ends it.
    send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")
    turn = page.locator(".turn").last
    box = page.get_by_label("Steer the answer")
    box.fill(f"say {STEERED_REPLY}")
    box.press("Enter")

    steer = turn.locator(".msg--steer")
    expect(steer).to_have_attribute("data-steer", "applied")
    expect(turn.locator(".msg--assistant").last).to_have_text(STEERED_REPLY)
    expect_idle(page)
    assert axe_violations(page) == []
    shown = transcript_snapshot(page)
    # The text written before the steer stays, as it was written (settled as Markdown).
    partial = STALLED_TEXT
    assert shown[:4] == [
        "user: stall",
        f"answer: {partial}",
        f"steer [applied] : say {STEERED_REPLY}",
        f"answer: {STEERED_REPLY}",
    ]

    page.reload()
    expect(page.locator(".msg--steer")).to_have_count(1)
    expect_idle(page)
    assert transcript_snapshot(page)[:4] == shown[:4]


@pytest.fixture(scope="module")
def slow_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The demo model writing a word every 0.2 s: its long answer takes over a minute."""
    with serve(tmp_path_factory.mktemp("slow"), "slow", "demo", {"ZETT_DEMO_PACE": "0.2"}) as s:
        yield s


def test_the_demo_s_long_answer_turns_to_a_steer_typed_while_it_streams(
    page: Page, slow_demo: LiveServer
) -> None:
    open_new_chat(page, slow_demo)
    send(page, "write a long answer")
    turn = page.locator(".turn").last
    expect(turn.locator(".msg--assistant").first).to_contain_text("How an answer reaches")
    box = page.get_by_label("Steer the answer")
    box.fill("What is 6 * 7?")
    box.press("Enter")

    expect(turn.locator(".msg--steer")).to_have_attribute("data-steer", "applied")
    expect(turn.locator(".msg--assistant").last.locator("strong")).to_have_text("42")
    expect_idle(page)
    written = turn.locator(".msg--assistant").first.inner_text()
    assert len(written) < len(LONG_ANSWER) / 2  # cut short, not written to the end
