"""Limits per person (agent_app.guard.limits), their settings checks (agent_app.checks) and the
origin check (agent_app.guard.origins), through the real ASGI app."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from agent_app.guard.limits import Limiter, current_limits, limiter
from agent_app.models import ChatCreation, ChatSession
from tests.app.llm_doubles import say
from tests.app.services import REDIS_URL, require_service
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]


async def pings_answered(socket, count: int) -> tuple[int, int]:
    """Send ``count`` pings; return (pongs, rate_limited errors)."""
    pongs = limited = 0
    for _ in range(count):
        await socket.send({"type": "ping"})
        frame = await socket.receive()
        if frame["type"] == "pong":
            pongs += 1
        else:
            assert frame["code"] == "rate_limited", frame
            limited += 1
    return pongs, limited


# --- the frame budget ------------------------------------------------------------------------


def test_the_limits_are_read_once_and_read_again_when_a_setting_changes(settings):
    settings.ZETT_WS_RATE_LIMIT = {"burst": 7, "per_second": 1.5}
    first = current_limits()
    assert (first.burst, first.per_second) == (7, 1.5)
    assert current_limits() is first  # kept: every inbound frame asks
    settings.ZETT_WS_MAX_SOCKETS_PER_PERSON = 4
    changed = current_limits()
    assert changed is not first and changed.max_sockets_per_person == 4
    settings.ZETT_WS_RATE_LIMIT = {"burst": 0, "per_second": 1.5}
    with pytest.raises(ImproperlyConfigured, match="ZETT_WS_RATE_BURST"):
        current_limits()


async def test_the_frame_budget_is_per_person_across_all_their_sockets(
    sockets, use_model, settings, browser_cookie
):
    settings.ZETT_WS_RATE_LIMIT = {"burst": 5, "per_second": 0.0}
    use_model(ScriptedModel())
    mine = [await sockets() for _ in range(4)]
    answered = [await pings_answered(socket, 3) for socket in mine]
    assert sum(pongs for pongs, _ in answered) == 5
    assert sum(limited for _, limited in answered) == 7
    someone_else = await sockets(cookie=await browser_cookie())
    assert await pings_answered(someone_else, 5) == (5, 0)


async def test_a_budget_shared_through_redis_holds_across_processes(settings):
    url = require_service("Redis", REDIS_URL)
    settings.ZETT_LIMITS_REDIS_URL = url
    settings.ZETT_WS_RATE_LIMIT = {"burst": 4, "per_second": 0.001}
    person = f"browser:test-{uuid.uuid4()}"
    first, second = Limiter(), Limiter()  # two worker processes, as far as budgets go
    try:
        verdicts = [await limiter.take_frame(person) for limiter in [first, second] * 4]
        assert verdicts.count(True) == 4 and verdicts[-2:] == [False, False]
        assert await first.take_frame(f"browser:test-{uuid.uuid4()}")  # others unaffected
    finally:
        first._redis and await first._redis.delete(f"zett:budget:{person}")
        await first.aclose()
        await second.aclose()


async def test_without_redis_the_budget_falls_back_to_the_process_and_says_so_once(
    settings, caplog
):
    settings.ZETT_LIMITS_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    settings.ZETT_WS_RATE_LIMIT = {"burst": 2, "per_second": 0.0}
    local = Limiter()
    try:
        assert [await local.take_frame("user:1") for _ in range(3)] == [True, True, False]
    finally:
        await local.aclose()
    assert caplog.text.count("Frame budgets fall back to this process") == 1


# --- sockets ---------------------------------------------------------------------------------


async def test_a_session_takes_at_most_its_number_of_sockets(sockets, use_model, settings):
    settings.ZETT_WS_MAX_SOCKETS_PER_SESSION = 3
    use_model(ScriptedModel())
    first = await sockets()
    others = [await sockets(first.session_id) for _ in range(2)]
    refused = await sockets(first.session_id, expect_session=False)
    await refused.expect_error("rate_limited")
    closing = await refused.communicator.receive_output(timeout=10)
    assert closing == {"type": "websocket.close", "code": 4429}
    await others[0].close()
    assert (await sockets(first.session_id)).connected
    assert limiter().open_sockets() == 3


async def test_a_person_holds_at_most_their_number_of_sockets(
    sockets, use_model, settings, browser_cookie
):
    settings.ZETT_WS_MAX_SOCKETS_PER_PERSON = 3
    use_model(ScriptedModel())
    for _ in range(3):
        await sockets()
    refused = await sockets(expect_session=False)
    await refused.expect_error("rate_limited")
    assert (await sockets(cookie=await browser_cookie())).connected


# --- chats per hour --------------------------------------------------------------------------


async def test_a_person_starts_at_most_their_number_of_chats_an_hour(
    sockets, use_model, settings, browser_cookie
):
    settings.ZETT_MAX_CHATS_PER_HOUR = 2
    use_model(ScriptedModel([say("one"), say("two"), say("three")]))
    for _ in range(2):
        socket = await sockets()
        await socket.send({"type": "user_message", "content": "hi"})
        await socket.run_to_completion()
    third = await sockets()
    await third.send({"type": "user_message", "content": "hi"})
    error = await third.expect_error("rate_limited")
    assert "2 chats in the last hour" in error["message"]
    assert not await ChatSession.objects.filter(pk=third.session_id).aexists()
    # A chat started over an hour ago no longer counts (its record says when it was).
    await ChatCreation.objects.filter(session_id=socket.session_id).aupdate(
        created_at=timezone.now() - timedelta(hours=1, minutes=1)
    )
    await third.send({"type": "user_message", "content": "hi"})
    await third.run_to_completion()
    assert await ChatSession.objects.acount() == 3


# --- settings checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("ZETT_WS_RATE_LIMIT", {"burst": 0, "per_second": 20}, "'burst' (ZETT_WS_RATE_BURST)"),
        ("ZETT_WS_RATE_LIMIT", {"burst": "ten", "per_second": 20}, "integer >= 1"),
        ("ZETT_WS_RATE_LIMIT", {"burst": 5, "per_second": -1}, "'per_second'"),
        ("ZETT_WS_RATE_LIMIT", {"burst": 5}, "must be a dict"),
        ("ZETT_WS_MAX_SOCKETS_PER_SESSION", 0, "ZETT_WS_MAX_SOCKETS_PER_SESSION must be"),
        ("ZETT_WS_MAX_SOCKETS_PER_PERSON", "x", "ZETT_WS_MAX_SOCKETS_PER_PERSON must be"),
        ("ZETT_MAX_CHATS_PER_HOUR", -3, "ZETT_MAX_CHATS_PER_HOUR must be"),
        ("ZETT_LIMITS_REDIS_URL", "localhost:6379", "ZETT_LIMITS_REDIS_URL"),
        ("ZETT_ALLOWED_ORIGINS", ["chat.example.com"], "is not an origin"),
        ("ZETT_ALLOWED_ORIGINS", ["https://chat.example.com/app"], "is not an origin"),
        ("ZETT_REQUIRE_LOGIN", "yes", "ZETT_REQUIRE_LOGIN must be True or False"),
    ],
)
def test_a_bad_setting_fails_the_system_checks_by_name(settings, setting, value, words):
    assert not [m for m in run_checks(tags=["zett"]) if m.is_serious()]
    setattr(settings, setting, value)
    errors = [m for m in run_checks(tags=["zett"]) if m.is_serious()]
    assert len(errors) == 1 and words in errors[0].msg, errors


def test_a_burst_of_zero_fails_manage_py_check_and_the_asgi_start():
    env = {**os.environ, "ZETT_WS_RATE_BURST": "0", "DJANGO_SETTINGS_MODULE": "zett_site.settings"}
    check = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert check.returncode != 0
    assert "'burst' (ZETT_WS_RATE_BURST) must be an integer >= 1, got 0" in check.stderr
    start = subprocess.run(
        [sys.executable, "-c", "import zett_site.asgi"],
        cwd=ROOT,
        env={**env, "ZETT_WS_RATE_BURST": "many"},
        capture_output=True,
        text=True,
    )
    assert start.returncode != 0
    assert "ImproperlyConfigured: Invalid zett settings" in start.stderr
    assert "got 'many'" in start.stderr


# --- origins ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "host", "admitted"),
    [
        # No Host header (never a browser): only the origin's host is judged, as Channels'
        # AllowedHostsOriginValidator does.
        ("http://testserver", None, True),
        ("https://testserver", None, True),
        ("http://testserver:8080", None, True),
        ("http://testserver.evil.example", None, False),  # host
        ("http://evil.example", None, False),
        ("null", None, False),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
        ("http://127.0.0.1:8001", "127.0.0.1:8000", False),
        ("https://127.0.0.1:8000", "127.0.0.1:8000", False),
        ("http://localhost:8000", "127.0.0.1:8000", False),
        ("http://[::1]:8000", "[::1]:8000", True),
        ("http://evil.example:8000", "evil.example:8000", False),  # not in ALLOWED_HOSTS
        ("", None, True),  # no Origin: not a browser
    ],
)
async def test_the_origin_must_match_scheme_host_and_port(
    sockets, use_model, origin, host, admitted
):
    use_model(ScriptedModel())
    headers = [(b"host", host.encode())] if host else []
    socket = await sockets(origin=origin, headers=headers, expect_session=admitted)
    assert socket.connected is admitted


async def test_explicit_allowed_origins_are_exact(sockets, use_model, settings):
    use_model(ScriptedModel())
    settings.ZETT_ALLOWED_ORIGINS = ["https://chat.example.com", "http://localhost:8000"]
    for origin, admitted in [
        ("https://chat.example.com", True),
        ("https://chat.example.com:443", True),
        ("http://chat.example.com", False),
        ("https://chat.example.com:8443", False),
        ("http://localhost:8000", True),
        ("http://localhost", False),
        ("http://testserver", False),
    ]:
        socket = await sockets(origin=origin, expect_session=admitted)
        assert socket.connected is admitted, origin


async def test_a_history_page_costs_the_budget_by_its_size(sockets, use_model, settings):
    from agent_app.guard.limits import history_page_cost

    settings.ZETT_WS_RATE_LIMIT = {"burst": 30, "per_second": 0.0}
    use_model(ScriptedModel([say("hello")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()  # one frame spent
    assert history_page_cost(50) == 11
    for _ in range(2):  # 22 of the 29 left
        await socket.send({"type": "history_before", "position": 10, "limit": 50})
        await socket.expect("history_page")
    await socket.send({"type": "history_before", "position": 10, "limit": 50})
    error = await socket.expect_error("rate_limited")
    assert "history" in error["message"]
    # Small pages and ordinary frames still fit what is left (29 - 22 - 1 = 6).
    await socket.send({"type": "history_before", "position": 10, "limit": 4})
    await socket.expect("history_page")
    await socket.assert_quiet()
