"""What happened stays what happened: after a reload the page shows the same conversation as
before it, whatever the outcome — an answer stopped part way, a failure, an approval, a
denial, an answered question, a steer, a run the server's crash interrupted — and a question
that waited while the server died comes back and can still be answered.

The comparison is ``transcript_snapshot``: every block as a reader sees it (messages,
steers, answers, tool cards, widgets with their outcome, notes, footers), without times.
The crash tests run their own server (``RestartableServer``), killed with SIGKILL and
started again on the same database and port, with the scripted model of
``browser_model.py`` (``stall`` streams and never ends; ``note <text>`` asks to save a note).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.app.browser.browser_model import STALLED_TEXT
from tests.app.browser.browser_support import (
    LiveServer,
    PageProbe,
    RestartableServer,
    expect_connected,
    expect_idle,
    last_answer,
    open_new_chat,
    send,
    transcript_snapshot,
)

pytest_plugins = ["tests.app.browser.browser_fixtures"]
pytestmark = pytest.mark.slow


def stop_part_way(page: Page) -> None:
    send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")
    page.get_by_role("button", name="Stop").click()


def fail(page: Page) -> None:
    send(page, "fail")
    expect(page.locator(".note--error")).to_be_visible()


def approve(page: Page) -> None:
    send(page, "Save a note: water the plants")
    page.locator(".widget--approval").get_by_role("button", name="Approve").click()
    expect(last_answer(page)).to_contain_text("Saved note")


def deny(page: Page) -> None:
    send(page, "Save a note: call the plumber")
    page.locator(".widget--approval").get_by_role("button", name="Deny").click()
    expect(last_answer(page)).to_contain_text("I did not save the note.")


def answer(page: Page) -> None:
    send(page, "help")
    page.locator(".widget--ask").get_by_role("button", name="The current time").click()
    expect(last_answer(page)).to_contain_text("what time is it in Asia/Tokyo?")


def steer(page: Page) -> None:
    send(page, "Save a note")
    question = page.locator(".widget--ask")
    expect(question).to_contain_text("What should the note say?")
    box = page.get_by_label("Steer the answer")
    box.fill("What is 6 * 7?")
    box.press("Enter")
    expect(page.locator(".msg--steer")).to_have_attribute("data-steer", "queued")
    question.get_by_label("Your answer").fill("Buy milk")
    question.get_by_role("button", name="Send answer").click()
    expect(page.locator(".msg--steer")).to_have_attribute("data-steer", "applied")
    expect(last_answer(page).locator("strong")).to_have_text("42")


OUTCOMES: dict[str, tuple[str, Callable[[Page], None], list[str]]] = {
    "stopped": ("scripted", stop_part_way, ["answer (stopped): Try what is 12", "note: Stopped."]),
    "failed": (
        "scripted",
        fail,
        ["note: The answer failed: The model service is unavailable (RuntimeError). Retry"],
    ),
    "approved": (
        "demo",
        approve,
        [
            "widget [answered] Allow save_note to run with these arguments? -> You approved this.",
            "tool save_note [done]",
        ],
    ),
    "denied": (
        "demo",
        deny,
        [
            "widget [answered] Allow save_note to run with these arguments? -> You denied this.",
            "tool save_note [denied]",
        ],
    ),
    "answered": (
        "demo",
        answer,
        ["widget [answered] What would you like to try? -> You answered: The current time"],
    ),
    "steered": ("demo", steer, ["steer [applied] : What is 6 * 7?"]),
}


@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_a_reload_shows_the_same_conversation_after_each_outcome(
    page: Page,
    daphne_server: LiveServer,
    scripted_server: LiveServer,
    outcome: str,
) -> None:
    server_name, act, expected = OUTCOMES[outcome]
    server = scripted_server if server_name == "scripted" else daphne_server
    open_new_chat(page, server)
    act(page)
    expect_idle(page)
    before = transcript_snapshot(page)
    for line in expected:
        assert line in before, f"{line!r} not in {before}"

    page.reload()

    expect_connected(page)
    expect_idle(page)
    assert transcript_snapshot(page) == before


# --- crashes -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crashing_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableServer]:
    """A server whose runs get one worker each: a run its crash cut off cannot go on."""
    model = "tests.app.browser.browser_model:browser_script_model"
    server = RestartableServer(
        tmp_path_factory.mktemp("crash"), "crashing", model, {"ZETT_RUN_ATTEMPTS": "1"}
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def continuing_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableServer]:
    """A server as deployed: a run its crash cut off is continued after the restart."""
    model = "tests.app.browser.browser_model:browser_script_model"
    server = RestartableServer(tmp_path_factory.mktemp("continue"), "continuing", model)
    server.start()
    yield server
    server.stop()


def crash_and_restart(page: Page, server: RestartableServer, probe: PageProbe) -> None:
    """SIGKILL the server, see the page lose the link, start the server again."""
    server.kill()
    expect(page.locator("#connection")).to_have_attribute("data-state", "waiting")
    server.start()
    # Skip the backoff wait, as the browser does when the network comes back.
    page.evaluate("window.dispatchEvent(new Event('online'))")
    expect_connected(page)
    # Chromium logs each refused attempt while the server was down; the page itself did not.
    probe.forgive("net::ERR_CONNECTION_REFUSED")


def test_a_run_the_crash_interrupted_says_so_and_reads_the_same_after_a_reload(
    page: Page, crashing_server: RestartableServer, probe: PageProbe
) -> None:
    open_new_chat(page, crashing_server)
    send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")  # rendered: nothing loads
    expect(page.get_by_role("button", name="Stop")).to_be_visible()

    crash_and_restart(page, crashing_server, probe)

    note = page.locator(".note--warning")
    expect(note).to_contain_text("The server stopped while this answer was being written.")
    expect(note.get_by_role("button", name="Retry")).to_be_visible()
    expect_idle(page)
    # What the person read stays on the page, marked interrupted (it was never stored).
    expect(last_answer(page)).to_contain_text("Try")
    before = transcript_snapshot(page)
    assert before[0] == "user: stall"

    page.reload()

    expect_connected(page)
    after = transcript_snapshot(page)
    # A reload shows what is stored: the message and the outcome, not the unstored text.
    assert after == [line for line in before if not line.startswith(("answer:", "footer:"))]
    send(page, "hello")
    expect(last_answer(page)).to_have_text("A scripted reply.")
    assert STALLED_TEXT.startswith("Try")


def test_a_run_the_crash_cut_off_goes_on_after_the_restart_without_its_half_written_text(
    page: Page, continuing_server: RestartableServer, probe: PageProbe
) -> None:
    open_new_chat(page, continuing_server)
    send(page, "stall")
    expect(last_answer(page).locator("em")).to_have_text("what is 12")  # rendered: nothing loads

    crash_and_restart(page, continuing_server, probe)

    # The same run goes on: a quiet line, the step written again (once), still running.
    expect(page.locator(".note--muted")).to_contain_text("Continued after a server restart.")
    expect(last_answer(page)).to_contain_text("Try")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    assert page.locator(".note--warning").count() == 0  # not "the server stopped"
    texts = page.locator(".turn").last.inner_text()
    assert texts.count("Try") == 1, texts
    page.get_by_role("button", name="Stop").click()
    expect_idle(page)


def test_an_approval_that_waited_through_a_crash_comes_back_and_saves_the_note_once(
    page: Page, crashing_server: RestartableServer, probe: PageProbe
) -> None:
    session_id = open_new_chat(page, crashing_server)
    send(page, "note water the plants")
    approval = page.locator(".widget--approval")
    expect(approval).to_contain_text("Allow save_note to run with these arguments?")

    crash_and_restart(page, crashing_server, probe)

    approval = page.locator(".widget--approval")
    expect(approval).to_have_attribute("data-state", "open")
    expect(approval.locator(".widget__arguments")).to_contain_text("water the plants")
    card = page.locator(".tool-card", has_text="save_note")
    expect(card).to_have_attribute("data-state", "waiting")
    expect_idle(page)  # paused: nothing runs until someone answers
    approval.get_by_role("button", name="Approve").click()

    expect(approval.locator(".widget__status")).to_have_text("You approved this.")
    expect(last_answer(page)).to_contain_text("Done: Saved note")
    expect(page.locator(".tool-card", has_text="save_note")).to_have_attribute("data-state", "done")
    expect_idle(page)
    notes = crashing_server.rows(
        "SELECT text FROM agent_app_note WHERE session_id = ?", session_id.replace("-", "")
    )
    assert notes == [("water the plants",)]
    before = transcript_snapshot(page)

    page.reload()

    expect_connected(page)
    assert transcript_snapshot(page) == before
