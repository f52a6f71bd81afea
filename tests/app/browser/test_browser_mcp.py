"""An MCP server's question on the page: a real stdio MCP server (``ZETT_MCP_SERVERS``), its
tool approved on the page, its question shown with the requested schema's field under the
tool's card, answered, and read back after a reload."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LiveServer,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    serve,
)
from tests.runtime.mcp_support import SERVER, calls_in

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    work = tmp_path_factory.mktemp("mcp")
    log = work / "stdio.log"
    servers = {
        "mcpServers": {
            "local": {"command": sys.executable, "args": [str(SERVER), "stdio", str(log)]}
        }
    }
    env = {"ZETT_MCP_SERVERS": json.dumps(servers), "ZETT_MCP_ALLOWED_COMMANDS": sys.executable}
    with serve(work, "mcp", "tests.app.durable_model:mcp_cleaner", env) as server:
        server.mcp_log = log
        yield server


def test_an_mcp_question_is_answered_on_the_page_and_reads_answered_after_a_reload(
    page: Page, mcp_server: LiveServer
) -> None:
    open_new_chat(page, mcp_server)
    send(page, "Clean up")
    approval = page.locator(".widget--approval")
    expect(approval).to_contain_text("local__delete_all")
    approval.get_by_role("button", name="Approve").click()

    question = page.locator(".widget--ask").filter(has_text="Why delete everything?")
    expect(question).to_have_attribute("data-state", "open")
    expect(question.locator(".widget__kicker")).to_have_text("local asks")
    expect(question.locator(".widget__deadline")).to_be_visible()
    question.get_by_role("button", name="Accept").click()
    expect(question.locator(".widget__status")).to_have_text("Fill in Reason first.")
    question.get_by_label("Reason").fill("spring cleaning")
    question.get_by_role("button", name="Accept").click()

    expect(question).to_have_attribute("data-state", "answered")
    expect(question.locator(".widget__status")).to_have_text(
        "You answered: reason: spring cleaning"
    )
    expect(last_answer(page)).to_contain_text("deleted because spring cleaning")
    expect_idle(page)
    assert [call["tool"] for call in calls_in(mcp_server.mcp_log)][-1:] == ["delete_all"]

    page.reload()
    expect_connected(page)
    expect(last_answer(page)).to_contain_text("deleted because spring cleaning")
    expect(page.locator(".widget--approval")).to_contain_text("You approved this.")
    expect(page.locator(".widget--ask")).to_contain_text("You answered: reason: spring cleaning")


def test_a_running_mcp_call_shows_its_progress_on_its_card(
    page: Page, mcp_server: LiveServer, tmp_path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    open_new_chat(page, mcp_server)
    send(page, f"gate: {gate}")
    card = page.locator(".tool-card").filter(has_text="local__gate")
    bar = card.locator("progress.tool-card__progress")
    expect(bar).to_have_attribute("max", "2")
    expect(bar).to_have_attribute("value", "1")
    expect(bar).to_have_attribute("aria-label", "1 of 2")
    expect(card.locator(".tool-card__progress-text")).to_have_text(
        re.compile("half way|waiting at the gate")
    )
    gate.write_text("go")  # the server's tool reads it and goes on
    expect(last_answer(page)).to_contain_text("through the gate")
    expect(card).to_have_attribute("data-state", "done")
    expect(bar).to_have_count(0)
