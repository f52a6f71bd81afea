"""Assistants that work together, tested as a host project tests them: with the testing
kit (``agent_app.testing``: ``ScriptModel``, ``override_assistant``, ``ChatClient``)."""

from __future__ import annotations

import pytest

from agent_app.assistants import Assistant, register, registry
from agent_app.models import ChatSession, SubRun
from agent_app.testing import ChatClient, ScriptModel, call, override_assistant, text
from zett_agent.tools.base import tool

pytestmark = pytest.mark.django_db(transaction=True)

REFUNDS: list[int] = []


@tool
async def refund_order(number: int) -> str:
    """Refund an order.

    Args:
        number: The order's number.

    Guidelines:
        - Only when asked.
    """
    REFUNDS.append(number)
    return f"Order {number} refunded: 40 EUR."


class FrontDesk(Assistant):
    id = "front"
    name = "Front desk"
    instructions = "You greet customers."
    delegates = ["billing"]
    handoffs = ["billing"]


class Billing(Assistant):
    id = "billing"
    name = "Billing"
    description = "Refunds and invoices."
    instructions = "You handle refunds."
    tools = [refund_order]
    approval_required = {"refund_order"}
    delegates = ["front"]


@pytest.fixture(autouse=True)
def desk():
    REFUNDS.clear()
    register(FrontDesk)
    register(Billing)
    yield
    registry.unregister("front")
    registry.unregister("billing")


def offered(model: ScriptModel, index: int = 0) -> set[str]:
    return {definition.name for definition in model.requests[index].tools}


async def test_a_delegates_approval_is_pending_with_its_agent_and_runs_the_tool_once(
    script_model, zett_chat
):
    front = script_model(
        [call("ask_billing", request="Refund order 7"), text("Done: 40 EUR back.")],
        assistant="front",
    )
    billing = script_model(
        [call("refund_order", number=7), text("Refunded 40 EUR.")], assistant="billing"
    )
    chat = await zett_chat(assistant="front")
    await chat.send("Please refund order 7")

    assert chat.status == "waiting"
    (wait,) = chat.pending
    assert (wait["kind"], wait["tool"], wait["agent"]) == ("approval", "refund_order", "billing")
    assert wait["payload"]["arguments"] == {"number": 7}
    assert REFUNDS == []

    await chat.approve()
    assert chat.status == "completed"
    assert chat.answer_text == "Done: 40 EUR back."
    assert REFUNDS == [7]
    assert front.requests[-1].messages[-1].content == "Refunded 40 EUR."
    assert billing.requests[-1].messages[-1].content == "Order 7 refunded: 40 EUR."
    marked = [event for event in chat.events if "agent" in event]
    assert {event["agent"] for event in marked} == {"billing"}
    (ask,) = [e for e in chat.events if e["type"] == "tool_started" and "agent" not in e]
    assert {event["parent_tool_call_id"] for event in marked} == {ask["tool_calls"][0]["id"]}


async def test_a_delegates_approval_is_answered_from_a_second_client(
    script_model, zett_chat, django_user_model
):
    ann = await django_user_model.objects.acreate_user("ann", password="unused-pw")
    script_model([call("ask_billing", request="Refund 7"), text("Refunded.")], assistant="front")
    script_model([call("refund_order", number=7), text("Done.")], assistant="billing")
    first = await zett_chat(user=ann, assistant="front")
    await first.send("Refund 7")
    second = await zett_chat(user=ann, chat=first.id)
    await second.approve()  # the wait reached the second tab by the replay
    assert second.status == "completed" and second.answer_text == "Refunded."
    assert REFUNDS == [7]


async def test_a_denied_delegate_approval_runs_nothing(script_model, zett_chat):
    script_model(
        [call("ask_billing", request="Refund 7"), text("Not refunded.")], assistant="front"
    )
    billing = script_model([call("refund_order", number=7), text("Declined.")], assistant="billing")
    chat = await zett_chat(assistant="front")
    await chat.send("Refund 7")
    await chat.deny()
    assert chat.answer_text == "Not refunded." and REFUNDS == []
    assert not billing.requests[-1].messages[-1].success


async def test_a_handoff_moves_the_chat_and_the_next_turn_goes_to_the_new_assistant(
    script_model, zett_chat
):
    front = script_model([call("transfer_to_billing", reason="a refund")], assistant="front")
    billing = script_model(
        [text("Billing here: which order?"), text("Order 7, then.")], assistant="billing"
    )
    chat = await zett_chat(assistant="front")
    await chat.send("I want a refund")
    assert chat.answer_text == "Billing here: which order?"
    assert (await ChatSession.objects.aget(pk=chat.id)).assistant == "billing"
    assert billing.requests[0].messages[0].content.startswith("You handle refunds.")
    assert "transfer_to_billing" in offered(front) and "refund_order" in offered(billing)

    await chat.send("Order 7")
    assert chat.answer_text == "Order 7, then."
    assert front.calls == 1 and billing.calls == 2


async def test_a_delegate_the_person_may_not_use_is_not_offered(script_model, zett_chat):
    front = script_model([text("Only I can help.")], assistant="front")
    with override_assistant("billing") as billing:
        type(billing).permission_required = "agent_app.view_chatsession"
        try:
            chat = await zett_chat(assistant="front")
            await chat.send("Refund 7")
        finally:
            del type(billing).permission_required
    assert not {"ask_billing", "transfer_to_billing"} & offered(front)


async def test_no_cycle_and_no_deeper_than_the_depth_limit(script_model, zett_chat, settings):
    front = script_model([call("ask_billing", request="7?"), text("Ok.")], assistant="front")
    billing = script_model([text("Fine.")], assistant="billing")
    chat = await zett_chat(assistant="front")
    await chat.send("Refund 7")
    assert "ask_billing" in offered(front)
    assert "ask_front" not in offered(billing)  # front is running in the chain

    settings.ZETT_MAX_DELEGATION_DEPTH = 0
    alone = script_model([text("Alone.")], assistant="front")
    async with ChatClient(assistant="front") as chat:
        await chat.send("Refund 7")
    assert "ask_billing" not in offered(alone)
    assert await SubRun.objects.acount() == 1
