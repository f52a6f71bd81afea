"""People in the loop in a real browser: 👍/👎 with a comment (page, phone, widget), "Talk
to a person", and a member of staff who finds the chat in the live inbox, takes it over,
writes to the customer and hands it back."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.app.browser.browser_support import (
    ARTIFACTS,
    LAYOUTS,
    ROOT,
    WAIT_MS,
    LiveServer,
    _server_env,
    expect_idle,
    last_answer,
    send,
    serve,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]

STAFF = """
from django.contrib.auth.models import Permission, User
alice = User.objects.create_user("alice", password="alice-pw-123", first_name="Alice")
alice.user_permissions.add(Permission.objects.get(codename="staff_chat"))
"""
SUPPORT = {
    "ZETT_ASSISTANTS": "tests.app.people.support_site.Support",
    "ZETT_DEFAULT_ASSISTANT": "support",
    "ZETT_SUPPORT_HOURS": "Mon-Fri, 9:00-17:00 CET",
}


@pytest.fixture(scope="module")
def support_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    work = tmp_path_factory.mktemp("people")
    with serve(work, "people", "demo", SUPPORT) as server:
        env = _server_env(server.database, "demo", SUPPORT)
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", STAFF],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        yield server


def open_new_chat(page: Page, server: LiveServer) -> str:
    """A new chat with the site's default assistant (the one that hands over to people)."""
    chat_id = str(uuid.uuid4())
    page.goto(f"{server.url}/s/{chat_id}/")
    expect(page.locator("#connection-label")).to_have_text("Connected")
    return chat_id


@pytest.fixture
def staff_page(
    browser: Browser, support_server: LiveServer, request: pytest.FixtureRequest
) -> Iterator[Page]:
    """A member of staff, signed in, in a browser context of their own (as wide as the
    customer's page of the test: staff answer from phones too)."""
    layout = request.node.callspec.params.get("page", LAYOUTS["wide-light"])
    context = browser.new_context(
        viewport={"width": layout["width"], "height": layout["height"]}, locale="en-US"
    )
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.goto(f"{support_server.url}/accounts/login/?next=/inbox/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pw-123")
    page.get_by_role("button", name="Sign in").or_(
        page.get_by_role("button", name="Log in")
    ).click()
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    yield page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-staff.png"), full_page=True)
    context.close()
    assert errors == [], f"the staff page logged errors: {errors}"


@pytest.mark.parametrize(
    "page", [LAYOUTS["wide-light"], LAYOUTS["narrow-dark"]], ids=["wide", "phone"], indirect=True
)
def test_rating_an_answer_with_a_comment(page: Page, support_server: LiveServer) -> None:
    chat_id = open_new_chat(page, support_server)
    send(page, "hello")
    expect_idle(page)
    answer = last_answer(page)
    expect(answer).to_be_visible()
    rating = page.get_by_role("group", name="Rate this answer").last
    rating.get_by_role("button", name="Good answer").click()
    expect(rating.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    rating.get_by_role("button", name="Bad answer").click()  # changed: still one rating
    expect(rating.get_by_role("button", name="Bad answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(rating.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "false"
    )
    page.get_by_placeholder("Tell us more (optional)").fill("It did not answer my question")
    page.get_by_role("button", name="Send comment").click()
    expect(rating.get_by_text("Thanks!")).to_be_visible()
    expect(rating).to_have_attribute("data-saved", "down+comment")  # the server stored it
    sql = "SELECT rating, comment FROM agent_app_chatfeedback WHERE session_id = ?"
    stored = support_server.rows(sql, chat_id.replace("-", ""))
    assert stored == [("down", "It did not answer my question")]
    # After a reload the answer is rated by its stored id: the same row changes.
    page.reload()
    rating = page.get_by_role("group", name="Rate this answer").last
    rating.get_by_role("button", name="Good answer").click()
    expect(rating).to_have_attribute("data-saved", "up")
    assert support_server.rows(sql, chat_id.replace("-", "")) == [("up", "")]


@pytest.mark.parametrize(
    "page", [LAYOUTS["wide-light"], LAYOUTS["narrow-light"]], ids=["wide", "phone"], indirect=True
)
def test_a_person_takes_the_chat_over_from_the_inbox_and_hands_it_back(
    page: Page, staff_page: Page, support_server: LiveServer
) -> None:
    open_new_chat(page, support_server)
    send(page, "hello")
    expect_idle(page)
    title = page.locator(".msg--user").first.inner_text()
    assert "hello" in title

    # "Talk to a person": the chat says someone will come, and when the team answers.
    page.get_by_role("button", name="Talk to a person").click()
    banner = page.locator('[data-part="support"]')
    expect(banner).to_contain_text("A person from the team has been asked to join")
    expect(banner).to_contain_text("Mon-Fri, 9:00-17:00 CET")

    # The inbox (open before the request) lists the chat by itself; staff open it.
    staff = staff_page
    waiting = staff.locator('[data-list="people"] .inbox__item').filter(has_text="hello")
    expect(waiting.first).to_be_visible(timeout=WAIT_MS + 10_000)
    waiting.first.get_by_role("link").click()
    expect(staff.locator('[data-part="state"]')).to_have_text("Read-only")
    expect(staff.locator('[data-part="composer"]')).to_be_hidden()
    staff.get_by_role("button", name="Take over").click()
    expect(staff.locator('[data-part="state"]')).to_have_text("Alice answers")
    expect(banner).to_have_text("Alice from the team answers here now.")

    staff.get_by_label("Your message to the customer").fill("Hi, I am Alice. How can I help?")
    staff.get_by_label("Your message to the customer").press("Enter")
    from_staff = page.locator(".msg--staff").last
    expect(from_staff).to_contain_text("Hi, I am Alice. How can I help?")
    expect(from_staff).to_contain_text("Alice · from the team")

    # The customer answers: no run starts, the member of staff reads it at once.
    send(page, "My parcel is late")
    expect(staff.locator(".staff-chat__entry--user").last).to_have_text("CustomerMy parcel is late")
    expect(page.locator('[data-part="stop"]')).to_be_hidden()
    page.reload()  # a reload shows the staff message and who answers
    expect(page.locator(".msg--staff").last).to_contain_text("Hi, I am Alice")
    expect(page.locator('[data-part="support"]')).to_have_text(
        "Alice from the team answers here now."
    )

    staff.get_by_role("button", name="Hand back to the assistant").click()
    expect(page.locator('[data-part="support"]')).to_be_hidden()
    send(page, "thanks")
    expect_idle(page)
    expect(last_answer(page)).to_be_visible()


def test_rating_in_the_widget(page: Page, widget_host: LiveServer) -> None:
    page.goto(f"{widget_host.url}/")
    chat = page.locator("zett-chat").first
    expect(chat.locator(".connection__label")).to_have_text("Connected")
    box = chat.get_by_label("Message", exact=True)
    box.fill("markdown")
    box.press("Enter")
    expect(chat.locator(".msg--assistant").last).to_contain_text("Shopping list")
    rating = chat.get_by_role("group", name="Rate this answer").last
    rating.get_by_role("button", name="Good answer").click()
    expect(rating.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(chat.get_by_placeholder("Tell us more (optional)")).to_be_visible()
    # No handoff for this assistant: no "Talk to a person".
    expect(chat.get_by_role("button", name="Talk to a person")).to_have_count(0)
    expect(rating).to_have_attribute("data-saved", "up")
    assert widget_host.rows("SELECT rating FROM agent_app_chatfeedback") == [("up",)]
