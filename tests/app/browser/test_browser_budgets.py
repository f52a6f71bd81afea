"""The token budget in the composer (agent_app.budgets): the page shows what is left today,
counts each answer off it, and a message past the budget is refused with when it resets,
its text back in the composer. A reload keeps the numbers (they are the server's).

The server's scripted model costs ``USAGE`` (1,234 tokens) a call; the budget is 2,000.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_model import USAGE
from tests.app.browser.browser_support import (
    LiveServer,
    axe_violations,
    expect_idle,
    open_new_chat,
    send,
    serve,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

BUDGET = 2_000
assert USAGE.total_tokens == 1_234


@pytest.fixture(scope="module")
def budget_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    model = "tests.app.browser.browser_model:browser_script_model"
    env = {"ZETT_TOKEN_BUDGETS": json.dumps({"anonymous": BUDGET})}
    with serve(tmp_path_factory.mktemp("budgets"), "budgets", model, env) as server:
        yield server


def test_the_composer_shows_the_budget_left_and_the_refusal(
    page: Page, budget_server: LiveServer
) -> None:
    open_new_chat(page, budget_server)
    meter = page.locator("#token-budget")
    expect(meter).to_have_text("2,000 of 2,000 tokens left today")

    send(page, "hello")
    expect_idle(page)
    expect(meter).to_have_text("766 of 2,000 tokens left today")

    send(page, "once more")  # 766 left: admitted, and it crosses the limit
    expect_idle(page)
    expect(meter).to_contain_text("No tokens left today; resets at")
    expect(meter).to_have_attribute("data-state", "exceeded")

    send(page, "and again")
    notice = page.locator(".notice")
    expect(notice).to_contain_text("You have used your token budget for today. It resets at")
    expect(page.get_by_label("Message", exact=True)).to_have_value("and again")
    expect(page.locator(".msg--user")).to_have_count(2)

    page.reload()
    expect(meter).to_contain_text("No tokens left today")
    assert axe_violations(page) == []
    page.set_viewport_size({"width": 375, "height": 700})  # a phone: everything still fits
    expect(meter).to_be_in_viewport()
    expect(page.locator("#send-button")).to_be_in_viewport()
    assert budget_server.rows(
        "SELECT input_tokens + output_tokens, calls FROM agent_app_tokenusage"
    ) == [(2 * USAGE.total_tokens, 2)]
