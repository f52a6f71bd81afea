"""Two real daphne workers on one PostgreSQL and one Redis, one session's sockets on both.

No sticky routing: a socket on either worker sees the same frames in the same order, at most
one run goes at a time, a reply or ``cancel`` sent through the worker that does not run the
run reaches the one that does, a socket that reconnects to the other worker is replayed
without loss, and when the worker running a run is SIGKILLed the other one continues the
run within the lease time and takes the session's next message.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from tests.app.servers import DaphneProcess, provider_valid, two_workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: Short, so a dead worker's run is settled quickly; renewal every third of it.
LEASE_SECONDS = "2"


@pytest.fixture(params=["pubsub", "core"])
async def workers(request, tmp_path) -> AsyncIterator[tuple[DaphneProcess, DaphneProcess]]:
    """Two workers on either of channels_redis's layers (``RedisPubSubChannelLayer``,
    ``RedisChannelLayer``): zett's fan-out works on both."""
    async with two_workers(
        f"cluster-{request.param}",
        tmp_path,
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0.03",
        ZETT_LEASE_SECONDS=LEASE_SECONDS,
        ZETT_REDIS_CHANNEL_LAYER=request.param,
    ) as (one, two, _):
        yield one, two


def event_is(kind: str, name: str | None = None):
    def match(frame: dict) -> bool:
        event = frame.get("event") or {}
        return event.get("type") == kind and (name is None or event.get("name") == name)

    return match


def numbered(frames: list[dict]) -> list[dict]:
    return [frame for frame in frames if "seq" in frame]


async def test_one_session_on_two_workers_behaves_as_on_one(workers):
    one, two = workers
    session_id = str(uuid.uuid4())
    first = await one.socket(session_id)
    second = await two.socket(session_id)

    # A run started on worker one: both sockets see the same frames, in order.
    await first.send({"type": "user_message", "content": "save a note: buy milk"})
    seen_one = await first.until(event_is("custom", "approval_requested"))
    seen_two = await second.until(event_is("custom", "approval_requested"))
    assert numbered(seen_one) == numbered(seen_two)
    assert seen_one[0]["type"] == "run_started"

    # One run at a time, whichever worker is asked.
    await second.send({"type": "user_message", "content": "me too"})
    assert (await second.expect("error"))["code"] == "busy"

    # The approval goes through worker two, to the run on worker one.
    payload = seen_two[-1]["event"]["payload"]
    approval = {"tool_call_id": payload["tool_call_id"], "approved": True}
    await second.send({"type": "external_event", "name": "approval_response", "payload": approval})
    result = await second.expect("external_event_result")
    assert result["accepted_by"] == ["ConfirmationExtension"]
    end_two = await second.until(event_is("run_completed"))
    end_one = await first.until(event_is("run_completed"))
    assert numbered(end_one) == numbered(end_two)
    seqs = [f["seq"] for f in numbered(seen_one + end_one)]
    assert seqs == sorted(set(seqs))

    # Cancel through worker one reaches a run that worker two started.
    await second.send({"type": "user_message", "content": "what is 1/3 + 1/6?"})
    await first.until(event_is("text_delta"))
    await first.send({"type": "cancel"})
    assert (await first.until(lambda f: f["type"] == "run_cancelled"))[-1]["type"]
    assert (await second.until(lambda f: f["type"] == "run_cancelled"))[-1]["type"]

    # A socket of worker one reconnects to worker two mid-run and misses nothing.
    await first.send({"type": "user_message", "content": "hello, what can you do?"})
    before = numbered(await first.until(event_is("text_delta")))
    await first.close()
    watcher = numbered(await second.until(event_is("custom", "ask_user")))
    back = await two.socket(session_id, after_seq=before[-1]["seq"])
    resumed = numbered(await back.until(event_is("custom", "ask_user")))
    assert [f["seq"] for f in before + resumed] == [f["seq"] for f in watcher]
    await back.close()
    await second.close()


async def test_killing_the_worker_that_runs_a_run_hands_the_session_to_the_other(workers):
    one, two = workers
    session_id = str(uuid.uuid4())
    owner = await one.socket(session_id)
    survivor = await two.socket(session_id)
    await owner.send({"type": "user_message", "content": "tell me a long story"})
    await survivor.until(event_is("text_delta"))
    sent_before = survivor.last_seq
    one.kill()
    # The survivor continues the run (same request) once the dead worker's lease lapses.
    continued = (await survivor.until(lambda f: f["type"] == "run_continued"))[-1]
    assert continued["seq"] > sent_before
    frames = await survivor.until(
        lambda f: event_is("run_completed")(f) or f["type"] in ("run_failed", "run_interrupted")
    )
    assert event_is("run_completed")(frames[-1]), frames[-1]
    again = await two.socket(session_id)
    frame = again.session_frame
    assert frame["history"][0]["content"] == "tell me a long story"
    assert provider_valid(frame["history"], frame["pending"])
    await again.send({"type": "user_message", "content": "what is 2 + 2?"})
    frames = await again.until(
        lambda f: event_is("run_completed")(f) or f["type"] in ("run_failed", "error")
    )
    assert event_is("run_completed")(frames[-1]), frames[-1]
    await again.close()
    await survivor.close()
