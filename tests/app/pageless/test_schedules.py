"""Scheduled runs: cron in a time zone (daylight saving included), each due time claimed
by exactly one worker, the catch-up rule after downtime, and the runs a schedule starts.

The race is run for real: worker processes claim 50 due times of one schedule at once on
PostgreSQL (``test_worker_processes_fire_each_due_time_exactly_once``).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from agent_app.models import ChatRun, ChatSession, RunStatus, ScheduledRun
from agent_app.models.cron import BadSchedule, check_cron, next_after
from agent_app.schedules.firing import claim_due
from agent_app.schedules.loop import Scheduler
from agent_app.sessions.registry import live_sessions
from tests.app.llm_doubles import say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


# --- cron and time zones -------------------------------------------------------------------


def test_a_daily_time_follows_its_time_zone_through_the_year():
    at_seven = [next_after("0 7 * * *", "America/New_York", utc(2026, m, 10)) for m in (1, 7)]
    assert at_seven == [utc(2026, 1, 10, 12), utc(2026, 7, 10, 11)]  # EST, then EDT
    assert next_after("0 7 * * *", "Asia/Tokyo", utc(2026, 1, 10)) == utc(2026, 1, 10, 22)
    assert next_after("0 7 * * *", "UTC", utc(2026, 1, 10, 7)) == utc(2026, 1, 11, 7)


def test_a_time_that_daylight_saving_skips_runs_at_the_jump_and_one_it_repeats_runs_once():
    """Berlin: 2026-03-29 02:00 jumps to 03:00; 2026-10-25 03:00 goes back to 02:00."""
    dues, moment = [], utc(2026, 3, 28, 12)
    for _ in range(2):
        moment = next_after("30 2 * * *", "Europe/Berlin", moment)
        dues.append(moment)
    assert dues == [utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)]  # 03:00 CEST, 02:30 CEST
    dues, moment = [], utc(2026, 10, 24, 12)
    for _ in range(2):
        moment = next_after("30 2 * * *", "Europe/Berlin", moment)
        dues.append(moment)
    assert dues == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]  # once, CEST then CET


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("* * * *", "5 fields"),
        ("0 0 * * * *", "5 fields"),
        ("61 * * * *", "Bad minute"),
        ("0 25 * * *", "Bad hour"),
        ("0 7 * * FUNDAY", "Bad day-of-week"),
    ],
)
def test_a_bad_cron_expression_is_refused_with_its_reason(expression, words):
    with pytest.raises(BadSchedule, match=words):
        check_cron(expression)


def test_a_schedule_is_checked_when_it_is_saved_from_a_form(django_user_model):
    owner = django_user_model.objects.create_user("ada")
    row = ScheduledRun(
        assistant="nobody", owner=owner, prompt=" ", cron="0 7 * *", timezone="Mars/Olympus"
    )
    with pytest.raises(ValidationError) as refused:
        row.full_clean()
    assert set(refused.value.message_dict) == {"prompt", "cron", "timezone"}
    assert "Mars/Olympus" in refused.value.message_dict["timezone"][0]


def test_saving_computes_the_next_run_and_a_changed_time_computes_it_again(django_user_model):
    owner = django_user_model.objects.create_user("ada")
    row = ScheduledRun.objects.create(
        assistant="demo", owner=owner, prompt="digest", cron="0 7 * * *", timezone="Asia/Tokyo"
    )
    assert row.next_fire_at is not None and row.next_fire_at.astimezone(UTC).hour == 22
    first = row.next_fire_at
    row.name = "renamed"
    row.save()
    assert ScheduledRun.objects.get().next_fire_at == first  # same time: unchanged
    row.cron = "0 9 * * *"
    row.save()
    assert ScheduledRun.objects.get().next_fire_at.astimezone(UTC).hour == 0
    row.enabled = False
    row.save()
    assert ScheduledRun.objects.get().next_fire_at is None


# --- claiming ------------------------------------------------------------------------------


def make_schedule(owner, *, cron: str = "* * * * *", due: datetime, **fields) -> ScheduledRun:
    row = ScheduledRun.objects.create(
        assistant="demo", owner=owner, prompt="digest please", cron=cron, **fields
    )
    ScheduledRun.objects.filter(pk=row.pk).update(next_fire_at=due)
    return ScheduledRun.objects.get(pk=row.pk)


def test_a_due_time_is_claimed_once_and_the_schedule_moves_to_the_next(django_user_model):
    owner = django_user_model.objects.create_user("ada")
    row = make_schedule(owner, cron="0 7 * * *", due=utc(2026, 5, 1, 7))
    assert claim_due(utc(2026, 5, 1, 6, 59)) == []
    [fire] = claim_due(utc(2026, 5, 1, 7, 0, 2))
    assert (fire.schedule_id, fire.due, fire.prompt) == (
        row.pk,
        utc(2026, 5, 1, 7),
        "digest please",
    )
    assert claim_due(utc(2026, 5, 1, 7, 0, 3)) == []
    row.refresh_from_db()
    assert (row.last_fired_at, row.next_fire_at) == (utc(2026, 5, 1, 7), utc(2026, 5, 2, 7))


def test_after_downtime_a_schedule_fires_once_not_once_per_missed_time(django_user_model):
    owner = django_user_model.objects.create_user("ada")
    row = make_schedule(owner, cron="*/10 * * * *", due=utc(2026, 5, 1, 7))
    fires = claim_due(utc(2026, 5, 1, 9, 5))  # twelve due times passed while nobody ran
    assert [fire.due for fire in fires] == [utc(2026, 5, 1, 7)]
    row.refresh_from_db()
    assert row.next_fire_at == utc(2026, 5, 1, 9, 10)
    assert claim_due(utc(2026, 5, 1, 9, 6)) == []


def test_a_disabled_schedule_never_fires(django_user_model):
    owner = django_user_model.objects.create_user("ada")
    make_schedule(owner, due=utc(2026, 5, 1, 7))
    ScheduledRun.objects.update(enabled=False)
    assert claim_due(utc(2026, 5, 2)) == []


@pytest.mark.slow
def test_worker_processes_fire_each_due_time_exactly_once(tmp_path):
    """Three processes claim the same 50 due times at once on PostgreSQL: 0 missed, 0
    doubled."""
    from tests.app.servers import ROOT, fresh_database, migrate, server_env

    first, count = utc(2026, 6, 1, 7), 50
    with fresh_database("postgres", tmp_path) as database_url:
        env = server_env(database_url)
        migrate(env)
        setup = (
            "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', "
            "'zett_site.settings'); django.setup()\n"
            "from datetime import datetime\n"
            "from django.contrib.auth import get_user_model\n"
            "from agent_app.models import ScheduledRun\n"
            "owner = get_user_model().objects.create_user('ada')\n"
            "ScheduledRun.objects.create(assistant='demo', owner=owner, prompt='p', "
            "cron='* * * * *')\n"
            f"ScheduledRun.objects.update(next_fire_at=datetime.fromisoformat('{first.isoformat()}'))\n"
        )
        subprocess.run([sys.executable, "-c", setup], cwd=ROOT, env=env, check=True, timeout=60)
        go = tmp_path / "go"
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.app.pageless.schedule_worker",
                    first.isoformat(),
                    str(count),
                    str(go),
                    str(index),
                    "3",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for index in range(3)
        ]
        for worker in workers:  # each is set up and connected: none starts ahead
            assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
        go.touch()
        outputs = [worker.communicate(timeout=120)[0] for worker in workers]
        assert [worker.returncode for worker in workers] == [0, 0, 0]
    won = [datetime.fromisoformat(line) for out in outputs for line in out.split()]
    expected = [first + timedelta(minutes=minute) for minute in range(count)]
    assert sorted(won) == expected  # each due time once: none missed, none twice
    assert sum(1 for out in outputs if out.strip()) >= 2  # the workers really competed


# --- the runs a schedule starts ------------------------------------------------------------


async def test_the_scheduler_starts_each_run_as_the_owner_in_a_new_chat(
    django_user_model, use_model
):
    use_model(ScriptedModel([say("Digest one."), say("Digest two.")]))
    owner = await sync_to_async(django_user_model.objects.create_user)("ada")
    row = await sync_to_async(make_schedule)(owner, cron="0 7 * * *", due=utc(2026, 5, 1, 7))
    clock = [utc(2026, 5, 1, 7, 0, 1)]
    scheduler = Scheduler(clock=lambda: clock[0])
    [first] = await scheduler.fire_due()
    await _all_runs_end()
    clock[0] = utc(2026, 5, 2, 7, 0, 1)
    [second] = await scheduler.fire_due()
    await _all_runs_end()
    runs = [
        await ChatRun.objects.select_related("session").aget(request_id=r) for r in (first, second)
    ]
    assert [run.status for run in runs] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
    chats = [run.session for run in runs]
    assert chats[0].pk != chats[1].pk
    assert all(chat.owner_id == owner.pk and chat.assistant == "demo" for chat in chats)
    await row.arefresh_from_db()
    assert (row.last_request_id, row.last_error) == (second, "")
    assert row.next_fire_at == utc(2026, 5, 3, 7)


async def _all_runs_end() -> None:
    for live in live_sessions():
        await live.wait_for_run()


async def test_a_one_chat_schedule_runs_in_the_same_chat_and_makes_a_new_one_if_deleted(
    django_user_model, use_model
):
    use_model(ScriptedModel([say("One."), say("Two."), say("Three.")]))
    owner = await sync_to_async(django_user_model.objects.create_user)("ada")
    row = await sync_to_async(make_schedule)(owner, due=utc(2026, 5, 1, 5), new_chat=False)
    clock = [utc(2026, 5, 1, 5, 0, 1)]
    scheduler = Scheduler(clock=lambda: clock[0])
    sessions = []
    for minute in range(3):
        clock[0] = utc(2026, 5, 1, 5, minute, 1)
        [request_id] = await scheduler.fire_due()
        await _all_runs_end()
        run = await ChatRun.objects.aget(request_id=request_id)
        assert run.status == RunStatus.COMPLETED
        sessions.append(str(run.session_id))
        if minute == 1:
            await ChatSession.objects.filter(pk=run.session_id).adelete()
    assert sessions[0] == sessions[1] != sessions[2]
    await row.arefresh_from_db()
    assert str(row.chat_id) == sessions[2] and row.last_error == ""


async def test_a_schedule_whose_owner_is_inactive_records_why_it_did_not_run(
    django_user_model,
):
    owner = await sync_to_async(django_user_model.objects.create_user)("ada", is_active=False)
    row = await sync_to_async(make_schedule)(owner, due=utc(2026, 5, 1, 5))
    assert await Scheduler(clock=lambda: utc(2026, 5, 1, 5, 0, 1)).fire_due() == [None]
    await row.arefresh_from_db()
    assert "owner" in row.last_error and row.last_request_id == ""


async def test_the_scheduler_loop_fires_what_is_due_until_it_is_stopped(
    django_user_model, use_model
):
    use_model(ScriptedModel([say("Digest.")]))
    owner = await sync_to_async(django_user_model.objects.create_user)("ada")
    row = await sync_to_async(make_schedule)(owner, due=utc(2026, 5, 1, 5))
    scheduler = Scheduler(clock=lambda: utc(2026, 5, 1, 5, 0, 1))
    scheduler.start()
    try:
        await scheduler.fired(1)
    finally:
        await scheduler.stop()
    await _all_runs_end()
    await row.arefresh_from_db()
    run = await ChatRun.objects.aget(request_id=row.last_request_id)
    assert run.status == RunStatus.COMPLETED


# --- the command ---------------------------------------------------------------------------


def test_manage_py_zett_schedule_takes_the_fields_names_too(django_user_model):
    django_user_model.objects.create_user("ada")
    call_command(
        "zett_schedule", "add", "--assistant", "demo", "--owner", "ada", "--cron", "0 7 * * *",
        "--time-zone", "Europe/Berlin", "--prompt", "Summarise the day",
    )  # fmt: skip
    row = ScheduledRun.objects.select_related("owner").get()
    assert (row.owner.username, row.timezone, row.new_chat) == ("ada", "Europe/Berlin", True)


def test_manage_py_zett_schedule_adds_lists_and_removes(django_user_model, capsys):
    django_user_model.objects.create_user("ada")
    call_command(
        "zett_schedule", "add", "--assistant", "demo", "--user", "ada", "--cron", "0 7 * * 1-5",
        "--timezone", "Europe/Berlin", "--prompt", "Summarise the day", "--one-chat",
    )  # fmt: skip
    row = ScheduledRun.objects.get()
    assert (row.cron, row.timezone, row.new_chat) == ("0 7 * * 1-5", "Europe/Berlin", False)
    assert "next run" in capsys.readouterr().out
    call_command("zett_schedule", "list")
    assert "Europe/Berlin" in capsys.readouterr().out
    with pytest.raises(CommandError, match="cron"):
        call_command(
            "zett_schedule", "add", "--assistant", "demo", "--user", "ada", "--cron", "0 7",
            "--prompt", "x",
        )  # fmt: skip
    with pytest.raises(CommandError, match="No assistant 'nobody'"):
        call_command(
            "zett_schedule", "add", "--assistant", "nobody", "--user", "ada", "--cron",
            "0 7 * * *", "--prompt", "x",
        )  # fmt: skip
    with pytest.raises(CommandError, match="no user"):
        call_command(
            "zett_schedule", "add", "--assistant", "demo", "--user", "bob", "--cron",
            "0 7 * * *", "--prompt", "x",
        )  # fmt: skip
    call_command("zett_schedule", "remove", str(row.pk))
    assert not ScheduledRun.objects.exists()


def test_zett_background_fires_schedules_only_where_runs_are_shared(settings):
    """Without Redis a web worker could not tell a run going on in that process from one
    whose process died, so the command refuses to fire schedules there."""
    settings.ZETT_REDIS_URL = None
    with pytest.raises(CommandError, match="needs REDIS_URL"):
        call_command("zett_background")


def test_every_worker_is_offered_the_webhook_and_schedule_loops():
    from agent_app.process import loops

    offered = dict(loops.registered())
    assert {"webhooks", "schedules"} <= set(offered)
    assert offered["webhooks"]().__qualname__ == "Deliverer.run"
    assert offered["schedules"]().__qualname__ == "Scheduler.run"


def test_the_admin_adds_a_schedule_and_refuses_an_unknown_assistant(admin_client, admin_user):
    form = {
        "name": "digest",
        "assistant": "nobody",
        "owner": admin_user.pk,
        "prompt": "Summarise the day",
        "cron": "0  7 * * 1-5",
        "timezone": "Europe/Berlin",
        "new_chat": "on",
        "enabled": "on",
    }
    refused = admin_client.post("/admin/agent_app/scheduledrun/add/", form)
    assert refused.status_code == 200 and b"No assistant" in refused.content
    assert not ScheduledRun.objects.exists()
    added = admin_client.post("/admin/agent_app/scheduledrun/add/", {**form, "assistant": "demo"})
    assert added.status_code == 302
    row = ScheduledRun.objects.get()
    assert row.cron == "0 7 * * 1-5" and row.next_fire_at is not None
    assert row.next_fire_at.astimezone(UTC).hour in (5, 6)  # 07:00 in Berlin
