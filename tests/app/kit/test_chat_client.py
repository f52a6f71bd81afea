"""``ChatClient`` over the site's real ASGI stack, with scripted models."""

from __future__ import annotations

import pytest

from agent_app.testing import ChatClient, ScriptModel, call, override_assistant, text

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_tool_call_and_its_answer(desk):
    model = ScriptModel([call("stock", item="boots"), text("We have 3 boots.")])
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("How many boots?")
            assert chat.status == "completed"
            assert chat.answer_text == "We have 3 boots."
    assert desk == ["stock boots"]
    types = [event["type"] for event in chat.events]
    assert types[0] == "model_started" and types[-1] == "run_completed"
    assert "tool_completed" in types


async def test_an_approval_waits_and_the_tool_runs_once_approved(desk):
    model = ScriptModel([call("refund", order=7), text("Done.")])
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("Refund order 7")
            assert chat.status == "waiting"
            (wait,) = chat.pending
            assert wait["kind"] == "approval" and wait["tool"] == "refund"
            assert wait["payload"]["arguments"] == {"order": 7}
            assert desk == []
            await chat.approve()
            assert chat.status == "completed" and chat.pending == []
            assert chat.answer_text == "Done."
    assert desk == ["refund 7 for AnonymousUser"]
    (result,) = [e for e in chat.events if e["type"] == "tool_completed"]
    assert result["message"]["content"] == "Refunded order 7."


async def test_a_denied_tool_never_runs_and_the_model_hears_why(desk):
    model = ScriptModel([call("refund", order=7), text("I did not refund it.")])
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("Refund order 7")
            await chat.deny()
            assert chat.answer_text == "I did not refund it."
    assert desk == []
    told = model.requests[-1].messages[-1]
    assert told.tool_call_id == wait_id(chat) and "den" in str(told.content).lower()


def wait_id(chat: ChatClient) -> str:
    (request,) = [e for e in chat.events if e["type"] == "custom"]
    return request["payload"]["tool_call_id"]


async def test_a_question_is_answered_and_the_model_reads_the_answer(desk):
    model = ScriptModel(
        [call("ask_user", question="Which size?", options=["41", "42"]), text("Size noted.")]
    )
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("I want boots")
            (wait,) = chat.pending
            assert wait["kind"] == "ask_user" and wait["payload"]["question"] == "Which size?"
            await chat.answer("42")
            assert chat.answer_text == "Size noted."
    assert model.requests[-1].messages[-1].content == "42"


async def test_the_calls_of_one_turn_wait_for_their_approvals_one_after_the_other(desk):
    model = ScriptModel(
        [[call("refund", order=1), call("refund", order=2), call("stock", item="hats")], text("ok")]
    )
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("Refund 1 and 2")
            (first,) = chat.pending
            assert first["payload"]["arguments"] == {"order": 1} and desk == []
            with pytest.raises(LookupError, match="No open wait has tool_call_id 'nope'"):
                await chat.approve(tool_call_id="nope")
            await chat.approve(tool_call_id=first["tool_call_id"])
            assert chat.status == "waiting"
            (second,) = chat.pending
            assert second["payload"]["arguments"] == {"order": 2}
            assert desk == ["refund 1 for AnonymousUser"]
            await chat.deny()
            assert chat.status == "completed" and chat.answer_text == "ok"
    assert desk == ["refund 1 for AnonymousUser", "stock hats"]


async def test_a_tool_sees_the_signed_in_person(desk, django_user_model):
    alice = await django_user_model.objects.acreate(username="alice")
    model = ScriptModel([call("whoami"), text("You are alice.")])
    with override_assistant("kit-desk", model=model):
        async with ChatClient(user=alice, assistant="kit-desk") as chat:
            await chat.send("Who am I?")
    (result,) = [e for e in chat.events if e["type"] == "tool_completed"]
    assert result["message"]["content"] == "alice"
    from agent_app.models import ChatSession

    stored = await ChatSession.objects.aget(pk=chat.id)
    assert stored.owner_id == alice.pk and stored.assistant == "kit-desk"
