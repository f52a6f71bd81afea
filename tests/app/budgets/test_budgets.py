"""Token budgets (agent_app.budgets): who gets how much, the ledger's decisions, and runs
refused or stopped through the real ASGI app with a scripted model of fixed usage.

``test_budgets_on_postgresql`` runs this file again on PostgreSQL (slow).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.core.checks import run_checks
from django.urls import reverse

from agent_app.budgets import admission, ledger
from agent_app.budgets.ledger import BudgetExceeded, Ticket, check_budget, limit_for, try_admit
from agent_app.guard.access import Person
from agent_app.models import ChatRun, RunStatus, TokenUsage
from tests.app.llm_doubles import GatedModel, call_tool, completed, say
from tests.app.services import POSTGRES_URL, require_service
from zett_agent.model import ModelEvent, ModelUsage
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
#: What every scripted call costs: 60 in + 40 out.
CALL = ModelUsage(input_tokens=60, output_tokens=40)
MONDAY = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def anonymous(key: str = "b1") -> Person:
    return Person(None, key)


@pytest.fixture
def at(monkeypatch):
    """``at(moment)``: the budgets' clock reads ``moment`` from now on."""

    def move(moment: datetime) -> None:
        monkeypatch.setattr(ledger, "clock", lambda: moment)

    return move


async def used_by(person: str) -> list[tuple[str, int, int, int]]:
    rows = TokenUsage.objects.filter(person=person).order_by("day")
    return [(str(row.day), row.input_tokens, row.output_tokens, row.calls) async for row in rows]


# --- who gets how much -----------------------------------------------------------------------


def test_no_setting_means_no_budget(settings, django_user_model):
    settings.ZETT_TOKEN_BUDGETS = None
    user = django_user_model.objects.create_user("ann")
    assert limit_for(Person(user.pk)) is None
    assert limit_for(anonymous()) is None
    assert check_budget(anonymous()) is None


def test_a_user_in_several_groups_gets_the_largest_and_one_in_none_gets_the_user_budget(
    settings, django_user_model
):
    settings.ZETT_TOKEN_BUDGETS = {
        "user": 1_000,
        "anonymous": 100,
        "groups": {"trial": 200, "team": 5_000, "lab": 3_000, "staff": None},
    }
    plain = django_user_model.objects.create_user("plain")
    trial = django_user_model.objects.create_user("trial")
    both = django_user_model.objects.create_user("both")
    staff = django_user_model.objects.create_user("staff")
    groups = {name: Group.objects.create(name=name) for name in ("trial", "team", "lab", "staff")}
    trial.groups.add(groups["trial"])
    both.groups.add(groups["team"], groups["lab"], groups["trial"])
    staff.groups.add(groups["staff"], groups["team"])
    plain.groups.add(Group.objects.create(name="unbudgeted"))

    assert limit_for(Person(plain.pk)) == 1_000  # "user": signed in, in no budgeted group
    assert limit_for(Person(trial.pk)) == 200  # a group's budget replaces "user", even lower
    assert limit_for(Person(both.pk)) == 5_000  # the largest of the person's groups
    assert limit_for(Person(staff.pk)) is None  # a group set to None: no limit
    assert limit_for(anonymous()) == 100


def test_a_category_left_out_has_no_limit(settings, django_user_model):
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 100}
    user = django_user_model.objects.create_user("ann")
    assert limit_for(Person(user.pk)) is None
    assert limit_for(anonymous()) == 100


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([100], "must be a dict or None"),
        ({"users": 100}, "unknown key 'users'"),
        ({"user": -1}, "['user'] must be tokens per day"),
        ({"anonymous": 1.5}, "['anonymous'] must be tokens per day"),
        ({"user": True}, "['user'] must be tokens per day"),
        ({"groups": ["staff"]}, "['groups'] must map group names"),
        ({"groups": {"staff": "lots"}}, "['groups']['staff'] must be tokens per day"),
    ],
)
def test_manage_py_check_names_what_is_wrong_with_the_budgets(settings, value, problem):
    settings.ZETT_TOKEN_BUDGETS = value
    errors = [error for error in run_checks(tags=["zett"]) if error.id == "zett.E030"]
    assert len(errors) == 1 and problem in errors[0].msg, errors


def test_good_budgets_pass_the_check(settings):
    settings.ZETT_TOKEN_BUDGETS = {"user": 0, "anonymous": None, "groups": {"staff": None}}
    assert [error for error in run_checks(tags=["zett"]) if error.id == "zett.E030"] == []


# --- the ledger --------------------------------------------------------------------------------


def test_calls_are_admitted_until_the_limit_and_the_budget_resets_the_next_day(settings, at):
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 250}
    person = anonymous()
    at(MONDAY)
    for _ in range(3):  # 100, 200, then 300: the call that crosses the limit is made
        ticket = try_admit(person, 250)
        assert isinstance(ticket, Ticket)
        ledger.settle(ticket, CALL.input_tokens, CALL.output_tokens)
    refused = try_admit(person, 250)
    assert isinstance(refused, BudgetExceeded)
    assert refused.code == "budget_exceeded"
    assert refused.resets_at == datetime(2026, 3, 3, tzinfo=UTC)
    assert refused.frame().dump() == {
        "type": "error",
        "code": "budget_exceeded",
        "message": refused.message,
        "resets_at": "2026-03-03T00:00:00Z",
        "limit": 250,
        "used": 300,
    }
    with pytest.raises(BudgetExceeded):
        check_budget(person)

    at(MONDAY + timedelta(hours=11, minutes=59))  # 23:59 the same day: still used up
    assert isinstance(try_admit(person, 250), BudgetExceeded)
    at(MONDAY + timedelta(hours=12))  # midnight: a new day, a new row
    assert check_budget(person).used == 0
    ticket = try_admit(person, 250)
    assert isinstance(ticket, Ticket)
    ledger.settle(ticket, 10, 5)
    row = TokenUsage.objects.get(person=person.key, day="2026-03-02")
    assert (row.total_tokens, row.calls, row.refusals) == (300, 3, 2)
    assert TokenUsage.objects.get(person=person.key, day="2026-03-03").total_tokens == 15


def test_a_call_with_calls_in_flight_is_admitted_only_while_their_reservations_fit(settings, at):
    at(MONDAY)
    person = anonymous()
    first = try_admit(person, 500)
    assert isinstance(first, Ticket) and first.reserved == 500  # no estimate: all of it
    assert try_admit(person, 500) is None  # undecided until the first call is measured
    ledger.settle(first, 60, 40)
    held = [try_admit(person, 500) for _ in range(4)]
    assert all(isinstance(ticket, Ticket) and ticket.reserved == 100 for ticket in held)
    assert try_admit(person, 500) is None  # 100 used + 400 reserved: nothing fits
    assert isinstance(try_admit(person, 500, force=True), Ticket)  # a caller that waited


def test_reservations_of_a_worker_that_died_lapse(settings, at):
    at(MONDAY)
    person = anonymous()
    assert isinstance(try_admit(person, 500), Ticket)  # never settled: its worker died
    assert try_admit(person, 500) is None
    at(MONDAY + timedelta(seconds=ledger.RESERVATION_SECONDS + 1))
    assert isinstance(try_admit(person, 500), Ticket)
    assert TokenUsage.objects.get(person=person.key).in_flight == 1


def test_the_typical_call_is_carried_over_to_the_next_day(at):
    at(MONDAY)
    person = anonymous()
    ticket = try_admit(person, 1_000)
    ledger.settle(ticket, 150, 50)
    at(MONDAY + timedelta(days=1))
    first = try_admit(person, 1_000)
    assert isinstance(first, Ticket) and first.reserved == 200
    assert isinstance(try_admit(person, 1_000), Ticket)  # no need to wait for it


def test_the_admin_lists_usage_per_person_per_day_with_the_budget_left(
    client, django_user_model, settings, at
):
    settings.ZETT_TOKEN_BUDGETS = {"user": 1_000, "anonymous": 300}
    admin = django_user_model.objects.create_superuser("admin", "admin@example.com", "pw-123456")
    ann = django_user_model.objects.create_user("ann")
    at(MONDAY)
    ledger.settle(try_admit(Person(ann.pk), 1_000), 400, 50)
    ledger.settle(try_admit(anonymous("browser-one"), 300), 250, 100)
    client.force_login(admin)
    page = client.get(reverse("admin:agent_app_tokenusage_changelist")).content.decode()
    assert "ann" in page and "browser:browser-one" in page
    for shown in ("450", "1,000", "550", "350", "300"):
        assert f">{shown}<" in page, shown
    assert ">0<" in page  # the anonymous browser has nothing left
    row = TokenUsage.objects.get(user=ann)
    change = client.get(reverse("admin:agent_app_tokenusage_change", args=[row.pk]))
    assert change.status_code == 200
    assert client.get(reverse("admin:agent_app_tokenusage_add")).status_code == 403


# --- runs through the socket ------------------------------------------------------------------


async def terminal(socket) -> dict:
    """The frame that ends one message: its run's end, or the refusal of the message."""
    frames = await socket.until(
        lambda frame: (
            frame["type"] in ("error", "run_failed")
            or (frame["type"] == "agent_event" and frame["event"]["type"] == "run_completed")
        )
    )
    return frames[-1]


async def test_twenty_concurrent_runs_spend_exactly_the_budget_and_the_rest_are_refused(
    sockets, use_model, settings, browser_cookie
):
    """A budget of 500 tokens and calls of 100: five runs answer, fifteen are refused."""
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 500}
    model = use_model(ScriptedModel([say("ok")] * 20, usage=CALL))
    cookie = await browser_cookie()
    chats = [await sockets(cookie=cookie) for _ in range(20)]
    assert chats[0].session_frame is not None
    await asyncio.gather(
        *(chat.send({"type": "user_message", "content": f"hi {n}"}) for n, chat in enumerate(chats))
    )
    ends = await asyncio.gather(*(terminal(chat) for chat in chats))

    answered = [end for end in ends if end["type"] == "agent_event"]
    refused = [end for end in ends if end["type"] == "error"]
    assert len(answered) == 5 and len(refused) == 15, ends
    assert {end["code"] for end in refused} == {"budget_exceeded"}
    assert all(end["resets_at"].endswith("T00:00:00Z") for end in refused)
    assert len(model.requests) == 5
    (row,) = [row async for row in TokenUsage.objects.all()]
    assert (row.total_tokens, row.calls, row.in_flight, row.reserved_tokens) == (500, 5, 0, 0)
    assert row.refusals == 15
    statuses = [run.status async for run in ChatRun.objects.all()]
    assert statuses == [RunStatus.COMPLETED] * 5  # a refused message stores no run


async def test_a_run_that_passes_its_budget_midway_makes_no_further_model_call(
    sockets, use_model, settings
):
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 100}
    model = use_model(
        ScriptedModel([call_tool("calculate", expression="1+1"), say("2")], usage=CALL)
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "what is 1+1?"})
    frames = await socket.until(lambda frame: frame["type"] == "run_failed")
    end = frames[-1]
    assert end["status"] == "budget_exceeded"
    assert end["error"]["type"] == "budget_exceeded"
    assert end["resets_at"].endswith("T00:00:00Z")
    kinds = [frame["event"]["type"] for frame in frames if frame["type"] == "agent_event"]
    assert kinds.count("model_started") == 1 and "tool_completed" in kinds
    assert len(model.requests) == 1
    run = await ChatRun.objects.aget()
    assert run.status == RunStatus.BUDGET_EXCEEDED
    assert run.error_type == "budget_exceeded"
    assert run.usage["input_tokens"] == 60

    # The next message is refused before it starts, and the reload shows the outcome.
    await socket.send({"type": "user_message", "content": "and 2+2?"})
    refusal = await socket.expect_error("budget_exceeded")
    assert refusal["used"] == 100 and refusal["limit"] == 100
    again = await sockets(socket.session_id)
    assert [run["status"] for run in again.session_frame["runs"]] == ["budget_exceeded"]
    assert len(model.requests) == 1


async def test_the_socket_is_told_the_budget_and_a_regenerate_is_refused_too(
    sockets, use_model, settings, at
):
    at(MONDAY)
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 100}
    use_model(ScriptedModel([say("one")], usage=CALL))
    socket = await sockets()
    assert await socket.expect("budget") == {
        "type": "budget",
        "limit": 100,
        "used": 0,
        "remaining": 100,
        "resets_at": "2026-03-03T00:00:00Z",
    }
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()
    await socket.send({"type": "regenerate"})
    await socket.expect_error("budget_exceeded")
    again = await sockets(socket.session_id)
    budget = await again.expect("budget")
    assert (budget["used"], budget["remaining"]) == (100, 0)


async def test_a_refused_person_chats_again_the_next_day(sockets, use_model, settings, at):
    at(MONDAY)
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 100}
    model = use_model(ScriptedModel([say("one"), say("two")], usage=CALL))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()
    await socket.send({"type": "user_message", "content": "again"})
    assert (await socket.expect_error("budget_exceeded"))["resets_at"] == "2026-03-03T00:00:00Z"
    at(datetime(2026, 3, 3, 0, 0, 1, tzinfo=UTC))
    await socket.send({"type": "user_message", "content": "again"})
    frames = await socket.run_to_completion()
    assert frames[0]["type"] == "run_started" and len(model.requests) == 2


async def test_signed_in_users_have_budgets_of_their_own(
    sockets, use_model, settings, login_cookie
):
    settings.ZETT_TOKEN_BUDGETS = {"user": 100, "anonymous": 1_000_000}
    use_model(ScriptedModel([say("one"), say("two")], usage=CALL))
    user, cookie = await login_cookie("ann")
    socket = await sockets(cookie=cookie)
    assert (await socket.expect("budget"))["limit"] == 100
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()
    await socket.send({"type": "user_message", "content": "again"})
    await socket.expect_error("budget_exceeded")
    assert await used_by(f"user:{user.pk}") == [(str(ledger.clock().date()), 60, 40, 1)]
    stranger = await sockets()  # an anonymous browser: its own row
    await stranger.expect("budget")
    await stranger.send({"type": "user_message", "content": "hi"})
    await stranger.run_to_completion()


async def test_without_budgets_nothing_is_counted_or_sent(sockets, use_model, settings):
    settings.ZETT_TOKEN_BUDGETS = None
    use_model(ScriptedModel([say("one")], usage=CALL))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "hi"})
    frames = await socket.run_to_completion()
    assert "budget" not in {frame["type"] for frame in frames}
    assert await TokenUsage.objects.acount() == 0


async def test_a_second_tab_is_told_busy_at_once_while_the_first_call_is_measured(
    sockets, use_model, settings
):
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 1_000}
    gate = asyncio.Event()
    use_model(GatedModel([ModelEvent.text("one"), gate, completed("one")]))
    one = await sockets()
    two = await sockets(one.session_id)
    await one.send({"type": "user_message", "content": "from one"})
    await two.until_event("text_delta")
    await two.send({"type": "user_message", "content": "from two"})
    assert (await two.expect("error"))["code"] == "busy"  # not after the call: now
    gate.set()
    await one.run_to_completion()
    assert (await TokenUsage.objects.aget()).in_flight == 0


async def test_a_stopped_answer_gives_its_reservation_back(sockets, use_model, settings):
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 1_000}
    use_model(GatedModel([ModelEvent.text("Thinking"), asyncio.Event()]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "think"})
    await socket.until_event("text_delta")
    row = await TokenUsage.objects.aget()
    assert (row.in_flight, row.reserved_tokens) == (1, 1_000)  # the first call: all of it
    await socket.send({"type": "cancel"})
    await socket.expect("run_cancelled")
    row = await TokenUsage.objects.aget()
    assert (row.in_flight, row.reserved_tokens, row.total_tokens) == (0, 0, 0)


async def test_a_waiting_admission_is_woken_by_a_settle_and_can_be_cancelled(
    settings, at, monkeypatch
):
    at(MONDAY)
    person = anonymous()
    waiting = asyncio.Event()
    wait_for_settle = admission._wait_for_settle

    async def observed(key: str, seconds: float) -> None:
        waiting.set()
        await wait_for_settle(key, seconds)

    monkeypatch.setattr(admission, "_wait_for_settle", observed)
    first = await sync_to_async(try_admit)(person, 500)
    waiter = asyncio.ensure_future(admission.admit(person, 500, wait=30))
    await waiting.wait()
    await admission.settle(first, CALL)
    ticket = await waiter  # woken by the settle, long before its 30 seconds
    assert ticket.reserved == 100
    waiting.clear()
    blocked = asyncio.ensure_future(admission.admit(person, 200, wait=30))
    await waiting.wait()  # 100 used and 100 in flight: undecided
    blocked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocked
    assert not admission._waiters


# --- PostgreSQL --------------------------------------------------------------------------------


def test_the_child_run_is_on_postgresql(settings):
    if os.environ.get("ZETT_BUDGETS_CHILD") != "1":
        pytest.skip("only in the PostgreSQL run of this file")
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_budgets_on_postgresql():
    """This file again, on PostgreSQL (row locks instead of SQLite's database lock)."""
    if os.environ.get("ZETT_BUDGETS_CHILD") == "1":
        pytest.skip("the child run itself")
    database_url = require_service("PostgreSQL", POSTGRES_URL)
    base, _, _ = database_url.rpartition("/")
    name = f"zett_budgets_{os.getpid()}"
    env = {**os.environ, "DATABASE_URL": f"{base}/{name}", "ZETT_BUDGETS_CHILD": "1"}
    env.pop("REDIS_URL", None)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=540,
        )
    finally:
        _drop_database(f"{base}/postgres", f"test_{name}")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\b2[0-9] passed\b", result.stdout), result.stdout[-2000:]


def _drop_database(admin_url: str, name: str) -> None:
    """pytest-django cannot drop a database its pool still holds a connection to."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
