"""Versions of a turn in the page and the widget: Edit on any message you sent, Regenerate
under any answer, a "2/3" switcher on a turn that has versions. A switch shows the other version
at once (no reload), in every tab, keeps the switched turn where it was on the screen, and
a reload shows the version last switched to. At 1280 px and at a phone's 375 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LAYOUTS,
    LiveServer,
    axe_violations,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    transcript_snapshot,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

TWO_LAYOUTS = pytest.mark.parametrize(
    "page",
    [LAYOUTS["wide-light"], LAYOUTS["narrow-dark"]],
    ids=["wide-light", "narrow-dark"],
    indirect=True,
)


def questions(page: Page):
    return page.locator("#transcript > .msg--user .msg__body")


def switcher(page: Page):
    return page.locator("#transcript > .msg--user").first.locator(".msg__versions")


@TWO_LAYOUTS
def test_edit_an_earlier_message_and_switch_between_its_versions_in_two_tabs(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "What is 6 * 7?")
    expect(last_answer(page).locator("strong")).to_have_text("42")
    expect_idle(page)
    send(page, "What is 2**10?")
    expect(last_answer(page).locator("strong")).to_have_text("1024")
    expect_idle(page)
    # Every message has its Edit, every answer its Regenerate; the last ones say so.
    expect(page.get_by_role("button", name="Edit this message")).to_have_count(1)
    expect(page.get_by_role("button", name="Edit your last message")).to_have_count(1)
    expect(page.get_by_role("button", name="Regenerate this answer")).to_have_count(1)
    expect(switcher(page)).to_have_count(0)
    other = page.context.new_page()
    other.goto(page.url)
    expect_connected(other)

    page.get_by_role("button", name="Edit this message").click()
    editor = page.get_by_label("Edit your message")
    expect(editor).to_have_value("What is 6 * 7?")
    editor.fill("What is 6 * 8?")
    editor.press("Enter")
    expect(last_answer(page).locator("strong")).to_have_text("48")
    expect_idle(page)
    expect(questions(page)).to_have_text(["What is 6 * 8?"])
    expect(switcher(page)).to_contain_text("2/2")
    expect(questions(other)).to_have_text(["What is 6 * 8?"])
    expect(switcher(other)).to_contain_text("2/2")
    expect(page.get_by_role("button", name="Next version")).to_be_disabled()
    expect(page.get_by_role("group", name="Version 2 of 2")).to_be_visible()

    bubble = page.locator("#transcript > .msg--user").first
    top = bubble.bounding_box()["y"]
    page.get_by_role("button", name="Previous version").click()
    expect(questions(page)).to_have_text(["What is 6 * 7?", "What is 2**10?"])
    expect(switcher(page)).to_contain_text("1/2")
    expect(page.locator(".msg--assistant strong")).to_have_text(["42", "1024"])
    assert abs(page.locator("#transcript > .msg--user").first.bounding_box()["y"] - top) < 2
    # The other tab follows, with no reload.
    expect(questions(other)).to_have_text(["What is 6 * 7?", "What is 2**10?"])
    expect(switcher(other)).to_contain_text("1/2")
    assert transcript_snapshot(other) == transcript_snapshot(page)
    other.close()

    # A message now continues the version shown.
    send(page, "What is 3 + 4?")
    expect(last_answer(page).locator("strong")).to_have_text("7")
    expect_idle(page)
    before = transcript_snapshot(page)
    page.reload()
    expect_connected(page)
    expect(switcher(page)).to_contain_text("1/2")
    assert transcript_snapshot(page) == before

    page.get_by_role("button", name="Next version").click()
    expect(questions(page)).to_have_text(["What is 6 * 8?"])
    expect(switcher(page)).to_contain_text("2/2")
    expect(page.get_by_role("button", name="Previous version")).to_be_focused()
    violations = axe_violations(page)
    assert violations == [], [(v["id"], v["help"]) for v in violations]


def test_regenerate_an_earlier_answer_keeps_the_later_turn_on_version_one(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    for question, answer in (("What is 6 * 7?", "42"), ("What is 2**10?", "1024")):
        send(page, question)
        expect(last_answer(page).locator("strong")).to_have_text(answer)
        expect_idle(page)
    page.get_by_role("button", name="Regenerate this answer").click()
    expect(questions(page)).to_have_text(["What is 6 * 7?"])
    expect(switcher(page)).to_contain_text("2/2")
    expect_idle(page)
    page.get_by_role("button", name="Previous version").click()
    expect(questions(page)).to_have_text(["What is 6 * 7?", "What is 2**10?"])
    expect(switcher(page)).to_contain_text("1/2")


@pytest.mark.parametrize("page", [LAYOUTS["narrow-light"]], indirect=True)
def test_the_widget_on_a_phone_switches_versions(page: Page, widget_host: LiveServer) -> None:
    page.goto(f"{widget_host.url}/launcher/")
    chat = page.locator("zett-chat").first
    chat.get_by_role("button", name="Chat with us").click()
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    box = chat.get_by_label("Message", exact=True)
    for text in ("hello", "markdown"):
        box.fill(text)
        box.press("Enter")
        expect(chat.get_by_role("button", name="Stop")).to_be_hidden()
        expect(chat.locator(".msg--user .msg__body").last).to_have_text(text)
    expect(chat.locator(".msg--assistant h2")).to_have_text("Shopping list")
    chat.get_by_role("button", name="Edit this message").click()
    editor = chat.get_by_label("Edit your message")
    editor.fill("something else")
    editor.press("Enter")
    nav = chat.locator(".msg__versions")
    expect(nav).to_contain_text("2/2")
    expect(chat.locator(".msg--assistant h2")).to_have_count(0)
    expect(chat.get_by_role("button", name="Stop")).to_be_hidden()
    step = chat.get_by_role("button", name="Previous version")
    expect(step).to_be_visible()
    box_of = step.bounding_box()
    assert box_of is not None and box_of["x"] + box_of["width"] <= LAYOUTS["narrow-light"]["width"]
    step.click()
    expect(nav).to_contain_text("1/2")
    expect(chat.locator(".msg--user .msg__body")).to_have_text(["hello", "markdown"])
    expect(chat.locator(".msg--assistant h2")).to_have_text("Shopping list")
