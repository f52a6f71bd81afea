"""Regenerate the last answer, edit the last message: the old turn is kept, as a version."""

from __future__ import annotations

import pytest

from agent_app.models import ChatMessage, ChatRun
from tests.app.llm_doubles import say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


def conversation(request) -> list[tuple[str, str]]:
    return [(m.role.value, m.content) for m in request.messages if m.role.value != "system"]


async def test_regenerate_answers_the_same_message_again_and_keeps_the_old_answer(
    sockets, use_model
):
    model = use_model(ScriptedModel([say("First try."), say("Second try."), say("Later.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Tell me"})
    await socket.run_to_completion()
    await socket.send({"type": "regenerate"})
    started = await socket.expect("run_started")
    assert (started["kind"], started["content"], started["superseded_from"]) == (
        "regenerate",
        "Tell me",
        0,
    )
    assert started["position"] == 0  # the new version takes the turn's place
    assert (await socket.run_to_completion())[-1]["event"]["message"]["content"] == "Second try."
    assert conversation(model.requests[1]) == [("user", "Tell me")]
    rows = [(m.content, m.superseded) async for m in ChatMessage.objects.order_by("pk")]
    assert rows == [
        ("Tell me", True),
        ("First try.", True),
        ("Tell me", False),
        ("Second try.", False),
    ]
    again = await sockets(socket.session_id)
    assert [m["content"] for m in again.session_frame["history"]] == ["Tell me", "Second try."]
    await again.send({"type": "user_message", "content": "And then?"})
    await again.run_to_completion()
    assert conversation(model.requests[2]) == [
        ("user", "Tell me"),
        ("assistant", "Second try."),
        ("user", "And then?"),
    ]


async def test_edit_last_replaces_the_last_message_and_answers_the_new_text(sockets, use_model):
    model = use_model(ScriptedModel([say("About cats."), say("About dogs.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "cats?"})
    await socket.run_to_completion()
    await socket.send({"type": "edit_last", "content": "dogs?"})
    started = await socket.expect("run_started")
    assert (started["kind"], started["content"], started["superseded_from"]) == ("edit", "dogs?", 0)
    await socket.run_to_completion()
    assert conversation(model.requests[1]) == [("user", "dogs?")]
    kinds = [run.kind async for run in ChatRun.objects.order_by("started_at")]
    assert kinds == ["message", "edit"]


async def test_regenerate_with_nothing_to_answer_or_while_running_is_refused(sockets, use_model):
    use_model(ScriptedModel())
    socket = await sockets()
    await socket.send({"type": "regenerate"})
    await socket.expect_error("bad_frame")
    await socket.send({"type": "edit_last", "content": "   "})
    await socket.expect_error("bad_frame")
    await socket.assert_quiet()
