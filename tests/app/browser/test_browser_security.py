"""Security in a real browser: the XSS corpus stays inert, another browser is refused.

Runs on the shared servers and fixtures of the browser tests (``browser_fixtures.py``:
headless Chromium against the real ASGI app on daphne). The corpus (``browser_model.XSS``)
travels through every channel a model or a user controls: the user's text and so the
chat's title, the answer's Markdown, reasoning, tool names, arguments and results, an
``ask_user`` question and its options, an approval and the note it saves; the page is
checked live, after a reload (history), on the chat list and in the admin.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.app.browser.browser_support import (
    ROOT,
    LiveServer,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


#: True when any element carries an event-handler attribute or a ``javascript:`` link.
LIVE_MARKUP = """() => [...document.querySelectorAll("*")].some((el) =>
  [...el.attributes].some((a) => a.name.startsWith("on")
    || (/^(href|src|action|formaction|srcdoc)$/.test(a.name) && /^\\s*javascript:/i.test(a.value))
    || a.name === "srcdoc"))"""


def assert_inert(page: Page) -> None:
    """Nothing of the XSS corpus ran or turned into live markup on this page."""
    assert page.evaluate("window.zettInjected") is None
    assert page.evaluate(LIVE_MARKUP) is False
    assert page.locator("main script, main iframe, main svg, main img").count() == 0


def test_the_xss_corpus_stays_inert_in_every_channel(
    page: Page, scripted_server: LiveServer, browser: Browser
) -> None:
    from tests.app.browser.browser_model import XSS, XSS_TEXT

    session_id = open_new_chat(page, scripted_server)
    send(page, f"xss {XSS_TEXT}")  # the user's text, and so the chat's title

    question = page.locator(".widget--ask")
    expect(question).to_contain_text(XSS[4])
    question.get_by_role("button", name=XSS[0]).click()
    approval = page.locator(".widget--approval")
    expect(approval.locator(".widget__arguments")).to_contain_text(XSS[1])
    approval.get_by_role("button", name="Approve").click()
    expect(last_answer(page).locator("h2")).to_contain_text("Heading")
    expect_idle(page)
    tool_cards = page.locator(".tool-card")
    expect(tool_cards).to_have_count(4)  # calculate, the unknown tool, ask_user, save_note
    for card in tool_cards.all():
        card.locator("summary").click()
    expect(page.locator("#chat-title")).to_contain_text(XSS[0])
    assert_inert(page)

    page.reload()  # the same conversation rebuilt from the stored history
    expect(page.locator("#connection-label")).to_have_text("Connected")
    expect(last_answer(page).locator("h2")).to_contain_text("Heading")
    assert_inert(page)

    page.goto(f"{scripted_server.url}/")  # the title in the chat list
    expect(page.locator(f'a[href="/s/{session_id}/"]')).to_contain_text(XSS[0])
    assert_inert(page)

    # The admin shows titles, messages, replies and the note the approval saved.
    subprocess.run(
        [sys.executable, "manage.py", "createsuperuser", "--noinput", "--username", "boss"],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": f"sqlite:///{scripted_server.database}",
            "DJANGO_SUPERUSER_PASSWORD": "pw-for-the-xss-test",
            "DJANGO_SUPERUSER_EMAIL": "boss@example.com",
        },
        check=True,
        capture_output=True,
    )
    page.goto(f"{scripted_server.url}/admin/login/")
    page.get_by_label("Username").fill("boss")
    page.get_by_label("Password").fill("pw-for-the-xss-test")
    page.get_by_role("button", name="Log in").click()
    expect(
        page.get_by_role("link", name="Log out").or_(page.get_by_text("Log out"))
    ).to_be_visible()
    for path in (
        "agent_app/chatsession/",
        f"agent_app/chatsession/{session_id}/change/",
        "agent_app/chatmessage/",
        "agent_app/externaleventrecord/",
        "zett_site/note/",
    ):
        page.goto(f"{scripted_server.url}/admin/{path}")
        expect(page.locator("#content")).to_be_visible()
        assert page.evaluate("window.zettInjected") is None
        assert page.evaluate(LIVE_MARKUP) is False
    expect(page.locator("#content")).to_contain_text(XSS[0])  # the note, shown as text


def test_another_browser_cannot_open_the_chat(
    page: Page, browser: Browser, daphne_server: LiveServer
) -> None:
    open_new_chat(page, daphne_server)
    send(page, "What is 6 * 7?")
    expect(last_answer(page).locator("strong")).to_have_text("42")

    stranger = browser.new_context()
    try:
        other = stranger.new_page()
        response = other.goto(page.url)
        assert response is not None and response.status == 404
        other.goto(f"{daphne_server.url}/")
        expect(
            other.locator(f'a[href="{page.url.removeprefix(daphne_server.url)}"]')
        ).to_have_count(0)
    finally:
        stranger.close()
