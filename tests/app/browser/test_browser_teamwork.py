"""A delegate at work on the page: its events inside the closed card of the call that runs
it, under its name; its approval opens the way to itself, and approving it lets the front
desk answer."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import LiveServer, expect_connected, expect_idle, send, serve

pytest_plugins = ["tests.app.browser.browser_fixtures"]

TEAM = "tests.app.team_assistants.FrontDesk,tests.app.team_assistants.Billing"


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"ZETT_ASSISTANTS": TEAM, "ZETT_DEFAULT_ASSISTANT": "front"}
    with serve(tmp_path_factory.mktemp("team"), "team", "demo", env) as server:
        yield server


def test_a_delegates_work_is_nested_in_its_tool_card_and_its_approval_answered(
    page: Page, team: LiveServer
) -> None:
    page.goto(f"{team.url}/s/{uuid.uuid4()}/?assistant=front")
    expect_connected(page)
    send(page, "Refund 7")
    ask = page.locator('.tool-card[data-tool-call-id="ask-1"]')
    work = ask.locator('.subrun[data-agent="billing"]')
    expect(work.locator(".subrun__head")).to_have_text("billing")
    refund = work.locator('.tool-card[data-tool-call-id="refund-1"]')
    expect(refund).to_have_attribute("data-state", "waiting")
    approval = work.locator(".widget--approval")
    expect(approval).to_be_visible()  # the closed card opened to show it
    approval.get_by_role("button", name="Approve").click()
    expect(refund).to_have_attribute("data-state", "done")
    expect(work.locator(".msg--assistant")).to_have_text("Billing: order 7 refunded")
    expect(ask).to_have_attribute("data-state", "done")
    expect_idle(page)
    # The front desk's own answer is the turn's, outside the card.
    answers = page.locator(".turn > .msg--assistant")
    expect(answers).to_have_text(["Front: Billing: order 7 refunded"])
