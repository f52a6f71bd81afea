"""What the server shortens to keep its frames small (docs/protocol.md, *Frame sizes*), and
how the page shows it: a history item cut short says so, an answer whose final text a frame
left out (``content_omitted``) keeps the text that streamed, and a tool result cut short
says the whole result is stored.

The frames are shortened by ``SocketGate`` in the shape the server sends them, since real
answers and results of half a megabyte would only make the tests slow.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LiveServer,
    SocketGate,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

TRUNCATED = "This message is too long to show here in full; it is stored whole."


def cut_history(frame: dict) -> dict:
    if frame["type"] == "session":
        for item in frame["history"]:
            item["content"] = f"The start of a long {item['role']} message"
            item["content_truncated"] = True
    return frame


def test_a_history_item_cut_short_says_so(page: Page, scripted_server: LiveServer) -> None:
    gate = SocketGate(page)
    open_new_chat(page, scripted_server)
    send(page, "hello")
    expect_idle(page)

    gate.rewrite = cut_history
    page.reload()

    expect_connected(page)
    bubble = page.locator(".msg--user")
    expect(bubble.locator(".msg__body")).to_have_text("The start of a long user message")
    expect(bubble.locator(".msg__truncated")).to_have_text(TRUNCATED)
    expect(last_answer(page)).to_have_text("The start of a long assistant message")
    expect(page.locator(".turn .msg__truncated")).to_have_text(TRUNCATED)


def omit_final_text(frame: dict) -> dict:
    """The final text left out, as the server does when the frame would be too large
    (a different text here, so a page that used it would show it)."""
    event = frame.get("event") if frame["type"] == "agent_event" else None
    if event and event["type"] in ("model_completed", "run_completed"):
        message = event.get("message") or event["response"]["message"]
        message["content"] = "NOT THE STREAMED TEXT"
        event["content_omitted"] = True
    return frame


def test_an_answer_whose_final_text_was_left_out_keeps_what_streamed(
    page: Page, scripted_server: LiveServer
) -> None:
    gate = SocketGate(page)
    gate.rewrite = omit_final_text
    open_new_chat(page, scripted_server)

    send(page, "hello")

    expect_idle(page)
    expect(last_answer(page)).to_have_text("A scripted reply.")
    expect(page.get_by_text("NOT THE STREAMED TEXT")).to_have_count(0)


def cut_tool_result(frame: dict) -> dict:
    event = frame.get("event") if frame["type"] == "agent_event" else None
    if event and event["type"] == "tool_completed":
        event["message"]["content"] = "4\n… [cut: 70000 characters in all]"
        event["content_truncated"] = True
    return frame


def test_a_tool_result_cut_short_says_the_whole_result_is_stored(
    page: Page, daphne_server: LiveServer
) -> None:
    gate = SocketGate(page)
    gate.rewrite = cut_tool_result
    open_new_chat(page, daphne_server)

    send(page, "What is 6 * 7?")

    expect_idle(page)
    card = page.locator(".tool-card", has_text="calculate")
    card.locator("summary").click()
    expect(card.locator(".tool-card__result")).to_contain_text("[cut: 70000 characters in all]")
    expect(card.locator(".tool-card__label").last).to_have_text(
        "Result (cut short here; the whole result is stored)"
    )
