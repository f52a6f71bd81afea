"""A steer typed while the answer is being written cuts it short at once (the chat's agent
opts in: ``agent.steering_interrupts_stream``): the partial answer is kept and stored, the
steer follows it, and the model answers the steer (docs/protocol.md, Steering)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async

from agent_app.durable.store import RowMeta, append_rows
from agent_app.models import ChatMessage, ChatRun, ChatSession, RunStatus, TokenUsage
from tests.app.conftest import answer_of, events_of, new_browser
from tests.app.llm_doubles import GatedModel, completed
from zett_agent.messages import AssistantMessage, UserMessage
from zett_agent.model import ModelEvent, ModelResponse, ModelUsage

pytestmark = pytest.mark.django_db(transaction=True)

#: Never set: only a steer (or Stop) ends the first answer.
NEVER = asyncio.Event


def steered_model() -> GatedModel:
    """Writes "Working on A", then waits for ever; answers the steer with "Now B."."""
    return GatedModel(
        [ModelEvent.text("Working on "), ModelEvent.text("A"), NEVER(), completed("never")],
        [ModelEvent.text("Now B."), completed("Now B.")],
    )


async def steer_during_the_answer(sockets, use_model):
    """Send "Do A", steer "Actually do B" after the first delta; the run's frames."""
    model = use_model(steered_model())
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Do A"})
    await socket.until_event("text_delta")
    await socket.send({"type": "steer", "content": "Actually do B"})
    frames = await socket.run_to_completion()
    return socket, model, frames


async def test_a_steer_during_the_text_ends_it_and_the_rest_of_the_answer_follows_it(
    sockets, use_model
):
    _, model, frames = await steer_during_the_answer(sockets, use_model)
    result = next(f for f in frames if f["type"] == "external_event_result")
    assert result["accepted_by"] == ["SteeringExtension"]
    assert model.closed.is_set()
    events = events_of(frames)
    kinds = [e["type"] for e in events if e["type"] != "text_delta"]
    assert kinds[kinds.index("content_completed") :] == [
        "content_completed",
        "model_completed",
        "steering_started",
        "model_started",
        "content_started",
        "content_completed",
        "model_completed",
        "steering_completed",
        "run_completed",
    ]
    cut = next(e for e in events if e["type"] == "model_completed")["response"]
    assert cut["finish_reason"] == "interrupted"
    assert cut["message"]["content"] == "Working on A"
    assert answer_of(frames) == "Now B."
    assert [m.content for m in model.requests[1].messages[-3:]] == [
        "Do A",
        "Working on A",
        "Actually do B",
    ]


async def test_the_partial_answer_and_the_steer_are_stored_in_order(sockets, use_model):
    socket, _, _ = await steer_during_the_answer(sockets, use_model)
    stored = [
        m
        async for m in ChatMessage.objects.filter(session_id=socket.session_id).order_by("position")
    ]
    assert [(m.role, m.content, m.steering, m.partial) for m in stored] == [
        ("user", "Do A", False, False),
        ("assistant", "Working on A", False, False),
        ("user", "Actually do B", True, False),
        ("assistant", "Now B.", False, False),
    ]
    reopened = await sockets(session_id=socket.session_id)
    history = reopened.session_frame["history"]
    assert [(m["role"], m["content"], m["steering"]) for m in history] == [
        ("user", "Do A", False),
        ("assistant", "Working on A", False),
        ("user", "Actually do B", True),
        ("assistant", "Now B.", False),
    ]
    assert history[1]["attributes"] == {"interrupted": True}


async def test_regenerate_after_a_steered_answer_answers_the_first_message_again(
    sockets, use_model
):
    socket, model, _ = await steer_during_the_answer(sockets, use_model)
    model.turns.append([ModelEvent.text("Again A."), completed("Again A.")])
    await socket.send({"type": "regenerate"})
    started = await socket.expect("run_started")
    assert (started["kind"], started["content"], started["superseded_from"]) == (
        "regenerate",
        "Do A",
        0,
    )
    await socket.run_to_completion()
    assert [m.content for m in model.requests[2].messages if m.role.value != "system"] == ["Do A"]
    shown = [
        (m.role, m.content)
        async for m in ChatMessage.objects.filter(
            session_id=socket.session_id, superseded=False
        ).order_by("position")
    ]
    assert shown == [("user", "Do A"), ("assistant", "Again A.")]


@sync_to_async
def leave_a_dead_steered_run(browser_key: str) -> tuple[str, str]:
    """A chat whose worker died right after a steer cut its answer short: the partial
    answer and the steer are stored, the run row still says ``running``."""
    session = ChatSession.objects.create(title="t", browser_key=browser_key)
    request_id = str(uuid.uuid4())
    ChatRun.objects.create(request_id=request_id, session=session, worker="dead:1:boot")
    partial = AssistantMessage("Working on A", attributes={"interrupted": True})
    append_rows(
        str(session.pk),
        request_id,
        [
            (UserMessage("Do A"), RowMeta()),
            (partial, RowMeta()),
            (UserMessage("Actually do B"), RowMeta(steering=True)),
        ],
    )
    return str(session.pk), request_id


async def test_a_run_whose_worker_died_after_the_steer_is_continued_from_it(sockets, use_model):
    model = use_model(GatedModel([ModelEvent.text("Now B."), completed("Now B.")]))
    cookie, key = await new_browser()
    session_id, request_id = await leave_a_dead_steered_run(key)
    socket = await sockets(session_id, cookie=cookie)
    await socket.expect("run_continued", request_id=request_id)
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Now B."
    assert [m.content for m in model.requests[0].messages[-3:]] == [
        "Do A",
        "Working on A",
        "Actually do B",
    ]
    stored = [
        (m.role, m.content, m.steering)
        async for m in ChatMessage.objects.filter(session_id=session_id).order_by("position")
    ]
    assert stored == [
        ("user", "Do A", False),
        ("assistant", "Working on A", False),
        ("user", "Actually do B", True),
        ("assistant", "Now B.", False),
    ]
    assert (await ChatRun.objects.aget(request_id=request_id)).status == RunStatus.COMPLETED


async def test_a_steered_answer_leaves_no_reservation_and_counts_what_was_reported(
    sockets, use_model, settings
):
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 100_000}
    used = ModelUsage(input_tokens=40, output_tokens=2)
    use_model(
        GatedModel(
            [ModelEvent.text("Working on "), NEVER(), completed("never")],
            [ModelEvent.completed(ModelResponse(AssistantMessage("Now B."), usage=used))],
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Do A"})
    await socket.until_event("text_delta")
    await socket.send({"type": "steer", "content": "Actually do B"})
    await socket.run_to_completion()
    row = await TokenUsage.objects.aget()
    # The cut call reported nothing; the call that answered the steer counts its usage.
    assert (row.in_flight, row.reserved_tokens, row.total_tokens) == (0, 0, 42)
