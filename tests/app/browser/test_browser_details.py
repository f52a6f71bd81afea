"""The details a first visit trips over: what ``hidden`` hides, a blank message, an
approval card's arguments, colours and deadline, and the chat on a 375 px phone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_support import (
    LAYOUTS,
    ROOT,
    WIDE,
    LiveServer,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    serve,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow

NARROW = pytest.mark.parametrize(
    "page", [LAYOUTS["narrow-light"]], ids=["narrow-light"], indirect=True
)


@pytest.fixture(scope="module")
def paced_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The demo model at the pace users see (``ZETT_DEMO_PACE``'s default), so a long answer
    streams for seconds."""
    with serve(tmp_path_factory.mktemp("paced"), "paced", "demo", {"ZETT_DEMO_PACE": "0.02"}) as s:
        yield s


#: Elements with the ``hidden`` attribute that a display rule shows anyway.
SHOWN_THOUGH_HIDDEN = """() => [...document.querySelectorAll("[hidden]")]
  .filter((node) => getComputedStyle(node).display !== "none")
  .map((node) => node.id || node.className || node.tagName)"""


def test_hidden_hides_whatever_the_element_s_class_says(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    # A new chat is not stored: nothing to rename or delete yet.
    expect(page.get_by_role("button", name="Rename this chat")).to_be_hidden()
    expect(page.get_by_role("button", name="Delete this chat")).to_be_hidden()
    assert page.evaluate(SHOWN_THOUGH_HIDDEN) == []

    send(page, "hello")
    expect_idle(page)
    expect(page.get_by_role("button", name="Rename this chat")).to_be_visible()

    # Renaming in the list hides the row's link and actions while the form is open.
    page.goto(f"{daphne_server.url}/")
    page.get_by_role("button", name="Rename hello").click()
    expect(page.get_by_label("New title")).to_be_focused()
    expect(page.locator(".session-links__link")).to_be_hidden()
    expect(page.get_by_role("link", name="Delete hello")).to_be_hidden()
    assert page.evaluate(SHOWN_THOUGH_HIDDEN) == []


def test_a_blank_message_disables_send_and_says_why_before_sending(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    box = page.get_by_label("Message", exact=True)
    send_button = page.locator("#send-button")
    hint = page.locator("#composer-hint")
    expect(send_button).to_be_disabled()  # nothing typed yet

    box.fill("   \n  ")
    expect(send_button).to_be_disabled()
    expect(hint).to_have_text("Only spaces: type a message to send.")
    box.press("Enter")
    expect(hint).to_have_text("Only spaces: type a message to send.")
    expect(page.locator(".msg--user")).to_have_count(0)

    box.fill("What is 2 + 2?")
    expect(hint).to_have_text("")
    expect(send_button).to_be_enabled()
    send_button.click()
    expect(last_answer(page).locator("strong")).to_have_text("4")
    expect_idle(page)
    expect(send_button).to_be_disabled()  # the box is empty again


def test_an_approval_shows_its_arguments_once_a_denial_plainly_and_an_hour_as_words(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "Save a note: call the plumber")
    approval = page.locator(".widget--approval")
    card = page.locator(".tool-card", has_text="save_note")
    expect(approval.locator(".widget__arguments")).to_contain_text('"text": "call the plumber"')
    expect(card.locator(".tool-card__preview")).to_be_hidden()
    expect(approval.locator(".widget__deadline")).to_have_text("Answer within an hour")
    texts = page.evaluate(
        """async () => {
          const { remainingText } = await import("/static/agent_app/deadline.js");
          return [3_600_000, 3_660_000, 1_800_001, 300_000, 61_000, 0].map(remainingText);
        }"""
    )
    assert texts == ["an hour", "an hour and a minute", "31 minutes", "5:00", "1:01", "0:00"]

    approval.get_by_role("button", name="Deny").click()

    status = approval.locator(".widget__status")
    expect(status).to_have_text("You denied this.")
    green = page.evaluate(
        """() => {
          const probe = document.createElement("span");
          probe.style.color = "var(--ok)";
          document.querySelector("[data-zett-root]").append(probe);
          const colour = getComputedStyle(probe).color;
          probe.remove();
          return colour;
        }"""
    )
    assert status.evaluate("(node) => getComputedStyle(node).color") != green
    expect(last_answer(page)).to_have_text(
        "I did not save the note. You denied it, so nothing was written."
    )
    expect_idle(page)
    expect(page.locator(".turn .markdown", has_text="ApprovalDenied")).to_have_count(0)


def box_of(page: Page, selector: str) -> dict:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not rendered"
    return box


@NARROW
def test_on_a_phone_the_bar_is_one_row_the_drawer_starts_under_it_and_rows_keep_their_actions(
    page: Page, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "Plan a trip to Lisbon in May")
    expect_idle(page)
    expect(page.get_by_role("button", name="Rename this chat")).to_be_visible()

    bar = box_of(page, ".topbar")
    title = box_of(page, "#chat-title")
    middle = title["y"] + title["height"] / 2
    for selector in ("#sidebar-toggle", "#chat-actions", "#connection"):
        other = box_of(page, selector)
        assert other["y"] < middle < other["y"] + other["height"], f"{selector} is on another row"
    assert bar["height"] < 64
    # The title shows more than its first word: "Plan a trip" fits before the ellipsis.
    fits = page.evaluate(
        """() => {
          const title = document.getElementById("chat-title");
          const range = document.createRange();
          range.setStart(title.firstChild, 0);
          range.setEnd(title.firstChild, "Plan a trip".length);
          return range.getBoundingClientRect().width <= title.clientWidth;
        }"""
    )
    assert fits, "the title is cut before its third word"

    page.get_by_role("button", name="Chats").click()
    drawer = page.get_by_role("navigation", name="Chats")
    expect(drawer).to_be_visible()
    page.wait_for_function(
        """() => getComputedStyle(document.getElementById("sidebar")).transform === "none" """
    )
    assert box_of(page, "#sidebar")["y"] >= bar["y"] + bar["height"] - 1
    home = drawer.get_by_role("link", name="zett")
    # The drawer's first link is where it is drawn, not under the bar.
    assert home.evaluate(
        """(link) => {
          const box = link.getBoundingClientRect();
          const hit = document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2);
          return link.contains(hit);
        }"""
    )

    page.goto(f"{daphne_server.url}/")
    row = box_of(page, ".list-page .session-links__link")
    for selector in ('[data-action="rename"]', '[data-action="delete"]'):
        action = box_of(page, f".list-page {selector}")
        bottom = action["y"] + action["height"]
        assert row["y"] <= action["y"] and bottom <= row["y"] + row["height"], selector


def test_the_demo_s_starter_prompts_show_code_a_table_and_a_long_answer_to_stop(
    page: Page, daphne_server: LiveServer, paced_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    starters = page.get_by_role("list", name="Say hello to start the conversation")
    expect(starters.get_by_role("button")).to_have_text(
        [
            "What is 1/3 + 1/6?",
            "Save a note: buy milk",
            "Show me a code example",
            "Compare the setups in a table",
            "Write a long answer",
            "Help",
        ]
    )
    starters.get_by_role("button", name="Show me a code example").click()
    expect(page.locator(".msg--user .msg__body")).to_have_text(["Show me a code example"])
    expect(starters).to_be_hidden()
    expect_idle(page)
    answer = last_answer(page)
    expect(answer.locator(".code-block__language")).to_have_text(["python", "javascript"])
    expect(answer.get_by_role("button", name="Copy python code")).to_be_visible()
    expect(answer.get_by_role("button", name="Copy javascript code")).to_be_visible()
    expect(answer.locator("code.hljs .hljs-keyword").first).to_be_visible()  # highlighted

    open_new_chat(page, daphne_server)
    page.get_by_role("button", name="Compare the setups in a table").click()
    expect_idle(page)
    table = last_answer(page).locator("table")
    expect(table.locator("th")).to_have_count(5)
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(table.locator("tbody tr").first).to_contain_text("manage.py runserver")

    open_new_chat(page, paced_server)
    page.get_by_role("button", name="Write a long answer").click()
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(last_answer(page)).to_contain_text("How an answer reaches this page")
    stop.click()
    expect(page.locator(".note", has_text="Stopped.")).to_be_visible()
    expect_idle(page)
    expect(last_answer(page)).not_to_contain_text("That is the whole path.")


def staff_signed_in(page: Page, server: LiveServer) -> Page:
    """A superuser in the server's database, signed in to the admin in a browser of their
    own (signing in where the chats were written would make them the staff's)."""
    password = "admin-" + uuid.uuid4().hex
    script = (
        "import django; django.setup(); from django.contrib.auth.models import User; "
        f"User.objects.create_superuser('staff-{password[-8:]}', 'staff@example.com', "
        f"'{password}')"
    )
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{server.database}"}
    env["DJANGO_SETTINGS_MODULE"] = "zett_site.settings"
    env.pop("REDIS_URL", None)
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True, timeout=120)
    page = page.context.browser.new_context(viewport=WIDE).new_page()
    page.goto(f"{server.url}/admin/login/?next=/admin/")
    page.get_by_label("Username").fill(f"staff-{password[-8:]}")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    return page


def test_the_admin_shows_a_chat_as_its_conversation(page: Page, daphne_server: LiveServer) -> None:
    session_id = open_new_chat(page, daphne_server)
    send(page, "Compare the setups in a table")
    expect_idle(page)
    page.get_by_role("button", name="Regenerate the last answer").click()
    expect(page.locator(".turn__meta")).to_have_count(1)
    expect_idle(page)

    page = staff_signed_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/admin/agent_app/chatsession/{session_id}/change/")
    messages = page.locator("#messages-group")
    # The answers read as Markdown (a table each); the turn the regeneration replaced (the
    # message as first sent, and its answer) is marked, so the message does not read as
    # sent twice; only tool rows could have a success mark (none here).
    expect(messages.locator("td.field-content_shown table")).to_have_count(2)
    superseded = messages.locator("tr:has(.zett-superseded) td.field-role")
    expect(superseded).to_have_text(["User", "Assistant"])
    expect(messages.locator("tr:not(:has(.zett-superseded)) td.field-role")).to_have_text(
        ["User", "Assistant"]
    )
    expect(messages.locator("td.field-succeeded img")).to_have_count(0)
    # A request id is one line, however narrow its column.
    for cell in page.locator("td.field-request_id").all():
        lines = cell.evaluate(
            "(node) => Math.round(node.querySelector('p').getBoundingClientRect().height"
            " / parseFloat(getComputedStyle(node.querySelector('p')).lineHeight))"
        )
        assert lines == 1
    page.goto(f"{daphne_server.url}/admin/agent_app/chatsession/")
    owner = page.locator(f"tr:has(a[href*='{session_id}']) td.field-owner_shown")
    expect(owner).to_have_text(re.compile(r"^anonymous · [0-9a-zA-Z_-]{8}$"))
    page.context.close()
