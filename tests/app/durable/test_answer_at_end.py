"""A run's final answer is stored in the transaction that records its end (one write, not two).

No frame says more than the database holds: the answer's ``model_completed`` frame leaves
only once the answer is stored, whether the run then ends (the answer goes with the end),
goes on (a steer: the answer is written first) or is cancelled (the runtime's cancellation
writes it). The writes are counted by wrapping the two functions that store a live run's messages:
``append_rows`` as the persistence extension calls it, and the run's end.
"""

from __future__ import annotations

import asyncio

import pytest

from agent_app.durable import persistence
from agent_app.models import ChatMessage, ChatRun, RunStatus
from agent_app.sessions import run_end
from agent_app.sessions.fanout import Feed
from tests.app.conftest import events_of, rows
from tests.app.llm_doubles import GatedModel, call_tool, completed, say
from zett_agent.model import ModelEvent
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def writes(monkeypatch):
    """What was stored, in order: ``("append", roles)`` or ``("end", status, roles)``; and
    for each ``model_completed`` frame sent, how many writes had finished by then."""
    log: list[tuple] = []
    sent: list[int] = []
    append, end = persistence.write_rows, run_end.write_end

    def roles(entries):
        return [message.role.value for message, _ in entries]

    async def appended(session_id, request_id, entries):
        result = await append(session_id, request_id, entries)
        log.append(("append", roles(entries)))
        return result

    async def ended(session_id, request_id, status, **fields):
        result = await end(session_id, request_id, status, **fields)
        log.append(("end", str(status), roles(fields.get("rows") or [])))
        return result

    send_local = Feed.send_local

    async def sending(self, text, seq=None):
        if '"model_completed"' in text:
            sent.append(len(log))
        await send_local(self, text, seq)

    monkeypatch.setattr(persistence, "write_rows", appended)
    monkeypatch.setattr(run_end, "write_end", ended)
    monkeypatch.setattr(Feed, "send_local", sending)
    return log, sent


def seqs_follow_on(frames: list[dict]) -> bool:
    numbers = [frame["seq"] for frame in frames if "seq" in frame]
    return numbers == list(range(numbers[0], numbers[0] + len(numbers)))


async def test_a_plain_answer_is_stored_with_the_run_end_and_announced_after(
    sockets, use_model, writes
):
    log, sent = writes
    use_model(ScriptedModel([say("Hi there.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi"})
    frames = await socket.run_to_completion()
    assert log == [("end", "completed", ["assistant"])]
    assert sent == [1]  # the model_completed frame left after that one write
    kinds = [event["type"] for event in events_of(frames)]
    assert kinds[-2:] == ["model_completed", "run_completed"]
    assert seqs_follow_on(frames)
    assert await rows(socket.session_id) == [("user", "Hi"), ("assistant", "Hi there.")]
    answer = await ChatMessage.objects.aget(session_id=socket.session_id, role="assistant")
    assert answer.stop_reason == "" and answer.usage is not None  # after_model's metadata
    run = await ChatRun.objects.aget(session_id=socket.session_id)
    assert run.status == RunStatus.COMPLETED


async def test_a_tool_calling_answer_is_written_at_once_and_only_the_last_waits_for_the_end(
    sockets, use_model, writes
):
    log, sent = writes
    use_model(ScriptedModel([call_tool("calculate", expression="6*7"), say("42.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "6*7?"})
    frames = await socket.run_to_completion()
    assert log == [
        ("append", ["assistant"]),
        ("append", ["tool"]),
        ("end", "completed", ["assistant"]),
    ]
    assert sent == [1, 3]
    assert seqs_follow_on(frames)
    stored = await rows(socket.session_id)
    assert [role for role, _ in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1] == ("assistant", "42.")


async def test_a_steer_after_a_final_answer_stores_the_answer_before_the_steer(
    sockets, use_model, writes
):
    log, sent = writes
    gate = asyncio.Event()
    use_model(
        GatedModel(
            # The stream parks after its response: the steer comes after the final answer
            # (one during the text would cut it short: ``test_steering_stream``).
            [ModelEvent.text("Working on A"), completed("Done with A"), gate],
            [ModelEvent.text("Now B."), completed("Now B.")],
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Do A"})
    await socket.until_event("content_completed")
    await socket.send({"type": "steer", "content": "Actually do B"})
    await socket.expect("external_event_result", name="steering_message")
    gate.set()
    frames = await socket.run_to_completion()
    kinds = [event["type"] for event in events_of(frames)]
    first_answer = kinds.index("model_completed")
    assert kinds.index("steering_started") > first_answer
    assert events_of(frames)[first_answer]["response"]["message"]["content"] == "Done with A"
    # Answer A is written with the steer, in one write, before the run goes on; answer B
    # (and the steer's completion, held with it) goes with the end.
    assert kinds[-3:] == ["model_completed", "steering_completed", "run_completed"]
    assert log == [
        ("append", ["assistant", "user"]),
        ("end", "completed", ["assistant"]),
    ]
    assert sent == [1, 2]  # answer A's frame left once A and the steer were stored
    assert seqs_follow_on(frames)
    assert await rows(socket.session_id) == [
        ("user", "Do A"),
        ("assistant", "Done with A"),
        ("user", "Actually do B"),
        ("assistant", "Now B."),
    ]


async def test_a_cancel_after_the_answer_stores_it_and_sends_its_frame_before_the_end(
    sockets, use_model, writes, monkeypatch
):
    """The run is held after its final answer (in ``on_success``) and cancelled there."""
    log, sent = writes
    reached, never = asyncio.Event(), asyncio.Event()
    on_success = persistence.OrmPersistenceExtension.on_success

    async def held_up(self, context, result):
        reached.set()
        await never.wait()
        await on_success(self, context, result)

    monkeypatch.setattr(persistence.OrmPersistenceExtension, "on_success", held_up)
    use_model(ScriptedModel([say("All done.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Go"})
    await socket.until_event("text_delta")
    await reached.wait()
    await socket.send({"type": "cancel"})
    frames = await socket.until(lambda frame: frame["type"] == "run_cancelled")
    assert [event["type"] for event in events_of(frames)][-1] == "model_completed"
    assert log[0] == ("append", ["assistant"])  # written by the cancellation, not lost
    assert log[-1] == ("end", "cancelled", [])
    assert sent == [2]  # held until the run's end, which came after the answer's write
    assert seqs_follow_on(frames)
    assert await rows(socket.session_id) == [("user", "Go"), ("assistant", "All done.")]


async def test_a_failed_end_still_stores_the_answer(sockets, use_model, writes, monkeypatch):
    log, _ = writes
    end = run_end.write_end

    async def failing(session_id, request_id, status, **fields):
        if fields.get("rows"):
            raise RuntimeError("the database went away")
        return await end(session_id, request_id, status, **fields)

    monkeypatch.setattr(run_end, "write_end", failing)
    use_model(ScriptedModel([say("Kept anyway.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi"})
    await socket.run_to_completion()
    assert ("append", ["assistant"]) in log
    assert await rows(socket.session_id) == [("user", "Hi"), ("assistant", "Kept anyway.")]
