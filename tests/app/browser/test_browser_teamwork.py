"""Assistants that work together, on the page: a delegate's events inside the closed card of
the call that runs it, under its name (its approval opens the way to itself); a handoff
names the assistant that answers now."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import LiveServer, expect_connected, expect_idle, send, serve

pytest_plugins = ["tests.app.browser.browser_fixtures"]

TEAM = ",".join(
    f"tests.app.team_assistants.{name}" for name in ("FrontDesk", "Billing", "Concierge")
)


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


def test_a_handoff_says_who_answers_now(page: Page, team: LiveServer) -> None:
    page.goto(f"{team.url}/s/{uuid.uuid4()}/?assistant=concierge")
    expect_connected(page)
    expect(page.locator("#chat-assistant")).to_have_text("with Concierge")
    send(page, "I was charged twice")
    expect(page.locator(".note", has_text="Billing answers from now on.")).to_be_visible()
    expect(page.locator("#chat-assistant")).to_have_text("with Billing")
    expect(page.locator(".turn > .msg--assistant").last).to_have_text(
        "Billing: Transferred to Billing: it answers from now on."
    )
    expect_idle(page)
    page.reload()
    expect(page.locator("#chat-assistant")).to_have_text("with Billing")
