"""``ChatClient`` over the site's real ASGI stack, with scripted models."""

from __future__ import annotations

import asyncio

import pytest

from agent_app.testing import (
    ChatClient,
    ChatRefused,
    ChatTimeout,
    ScriptExhausted,
    ScriptModel,
    call,
    override_assistant,
    text,
)
from zett_agent.model import ModelEvent

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


async def test_a_person_without_the_permission_is_refused_and_nothing_runs(desk, django_user_model):
    bob = await django_user_model.objects.acreate(username="bob")
    model = ScriptModel([call("stock", item="hats"), text("3.")])
    with override_assistant("kit-back", model=model):
        async with ChatClient(user=bob, assistant="kit-back") as chat:
            with pytest.raises(ChatRefused) as refused:
                await chat.send("Stock of hats?")
        assert refused.value.code == "forbidden"
        async with ChatClient(user=bob, assistant="nobody") as chat:
            with pytest.raises(ChatRefused, match="unknown_assistant"):
                await chat.send("Hi")
    assert model.calls == 0 and desk == []


async def test_a_script_that_runs_out_fails_the_test_that_sent_the_message(desk):
    model = ScriptModel([call("stock", item="hats")])
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk") as chat:
            with pytest.raises(ScriptExhausted) as exhausted:
                await chat.send("Stock of hats?")
    message = str(exhausted.value)
    assert "called 2 times but its script has 1 turn(s)" in message
    assert "3 hats in stock." in message  # what the model was asked to answer
    assert chat.status == "failed" and chat.error["type"] == "ScriptExhausted"


async def test_a_script_function_decides_from_the_messages_and_tools(desk):
    def shop(messages, tools):
        last = messages[-1]
        if last.role == "tool":
            return text(f"The tool said: {last.content}")
        assert "stock" in [tool.name for tool in tools]
        return call("stock", item=str(last.content).split()[-1])

    model = ScriptModel(shop)
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("count scarves")
            assert chat.answer_text == "The tool said: 3 scarves in stock."
            await chat.send("count gloves")
            assert chat.answer_text == "The tool said: 3 gloves in stock."
    assert model.calls == 4 and desk == ["stock scarves", "stock gloves"]


async def test_an_assert_inside_a_script_function_fails_the_test(desk):
    def picky(messages, tools):
        assert "please" in str(messages[-1].content), "the user forgot to say please"
        return text("ok")

    with override_assistant("kit-desk", model=ScriptModel(picky)):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("please help")
            with pytest.raises(AssertionError, match="forgot to say please"):
                await chat.send("help")


async def test_a_second_tab_sees_the_open_approval_and_another_person_is_kept_out(
    desk, django_user_model
):
    alice = await django_user_model.objects.acreate(username="alice")
    model = ScriptModel([call("refund", order=9), text("Refunded 9.")])
    with override_assistant("kit-desk", model=model):
        async with ChatClient(user=alice, assistant="kit-desk") as first:
            await first.send("Refund 9")
            async with ChatClient(user=alice, chat=first.id) as second:
                assert second.session["session_id"] == first.id
                assert [w["tool_call_id"] for w in second.pending] == [
                    w["tool_call_id"] for w in first.pending
                ]
                await second.approve()
                assert second.answer_text == "Refunded 9."
            with pytest.raises(ChatRefused) as refused:
                async with ChatClient(chat=first.id):  # an anonymous browser
                    pass
            assert refused.value.code == "forbidden"
    assert desk == ["refund 9 for alice"]


class ParkedModel:
    """Starts streaming, then waits for an event nobody sets."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()

    async def stream(self, request):
        try:
            yield ModelEvent.text("Thinking")
            await asyncio.Event().wait()
        finally:
            self.closed.set()


async def test_every_wait_is_bounded_and_says_what_it_waited_for(desk):
    model = ParkedModel()
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk", timeout=0.3) as chat:
            with pytest.raises(ChatTimeout) as late:
                await chat.send("Think hard")
    message = str(late.value)
    assert "waited 0.3s for the run answering 'Think hard' to end or wait for a reply" in message
    assert '"delta": "Thinking"' in message  # the last frames it saw
    assert model.closed.is_set()  # the run was stopped when the client closed


async def test_cancel_stops_a_waiting_run(desk):
    model = ScriptModel([call("refund", order=4)])
    with override_assistant("kit-desk", model=model):
        async with ChatClient(assistant="kit-desk") as chat:
            await chat.send("Refund 4")
            await chat.cancel()
            assert chat.status == "cancelled" and chat.pending == []
            with pytest.raises(ChatRefused, match="not_running"):
                await chat.cancel()
    assert desk == []


class EndlessModel:
    """Streams text forever, never waiting: only cancellation ends it."""

    async def stream(self, request):
        while True:
            yield ModelEvent.text("more ")


async def test_a_run_that_streams_forever_still_times_out(desk):
    with override_assistant("kit-desk", model=EndlessModel()):
        async with ChatClient(assistant="kit-desk", timeout=0.5) as chat:
            with pytest.raises(ChatTimeout, match=r"waited 0\.5s for the run answering"):
                await chat.send("Go on forever")
            with pytest.raises(RuntimeError, match="socket is gone"):
                await chat.send("Again")
    assert len(chat.events) > 10
