"""What a screen reader and a keyboard meet: every answer has its author, tool cards are
named without decoration glyphs, the link's state is spoken from one place, and the top
bar keeps one height whatever the link does.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LiveServer,
    SocketGate,
    axe_violations,
    expect_connected,
    expect_idle,
    open_new_chat,
    reconnect_now,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

TWO_WIDTHS = pytest.mark.parametrize(
    "page",
    [{"width": 1280, "height": 820}, {"width": 375, "height": 740}],
    ids=["1280", "375"],
    indirect=True,
)


def test_answers_are_labelled_with_their_author_and_tool_names_have_no_glyph(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "What is 12 * 7?")
    expect_idle(page)

    expect(page.get_by_role("article", name="Assistant")).to_have_count(1)
    summary = page.locator(".tool-card__summary").first
    expect(summary).to_have_accessible_name('Tool: calculate expression="12 * 7" done')
    name = summary.evaluate("node => getComputedStyle(node, '::before').content")
    assert name.endswith('/ ""'), name  # the arrow's alternative text is empty


def test_the_link_state_is_spoken_from_one_live_region(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    live = page.locator("[role=status], [aria-live]").filter(has_text="Connected")
    expect(live).to_have_count(1)
    expect(page.locator("#connection-label")).to_have_attribute("aria-hidden", "true")


@TWO_WIDTHS
def test_the_top_bar_keeps_its_height_whatever_the_link_does(
    page: Page, scripted_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, scripted_server)
    bar = page.locator(".topbar")
    heights = {"new chat": bar.bounding_box()["height"]}
    send(page, "hello")
    expect_idle(page)
    expect(page.get_by_role("button", name="Rename")).to_be_visible()
    heights["stored chat"] = bar.bounding_box()["height"]
    gate.block()
    gate.drop()
    expect(page.get_by_role("button", name="Retry now")).to_be_visible()
    heights["offline"] = bar.bounding_box()["height"]
    gate.unblock()
    reconnect_now(page)
    expect_connected(page)
    heights["back"] = bar.bounding_box()["height"]
    assert len(set(heights.values())) == 1, heights


@TWO_WIDTHS
def test_a_denied_call_and_the_offline_bar_have_no_serious_axe_findings(
    page: Page, daphne_server: LiveServer
) -> None:
    gate = SocketGate(page)
    open_new_chat(page, daphne_server)
    send(page, "Save a note: call the plumber")
    page.locator(".widget--approval").get_by_role("button", name="Deny").click()
    expect(page.locator(".tool-card", has_text="save_note")).to_have_attribute(
        "data-state", "denied"
    )
    expect_idle(page)
    assert axe_violations(page) == []
    gate.block()
    gate.drop()
    expect(page.get_by_role("button", name="Retry now")).to_be_visible()
    assert axe_violations(page) == []
