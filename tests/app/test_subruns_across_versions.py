"""A delegate's sub-run belongs to one call of one version of a turn.

Sub-runs are found again by ``(chat, parent_tool_call_id)`` so that a run continued after
a restart never runs a delegate twice. A model whose call ids repeat within a chat (the
offline demo numbers its calls along the shown path: ``demo_call_1`` again after an edit
of the first turn; scripted doubles with fixed ids) must not get, in the new version, the
stored answer of the old version's sub-run: a sub-run whose call got its result belongs to
that call, and a later call with the same id runs the delegate again.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agent_app.assistants import Assistant, register, registry
from agent_app.models import SubRun
from zett_agent.providers.demo import DemoModel
from zett_agent.tools.base import tool

pytestmark = pytest.mark.django_db(transaction=True)


@tool
async def refund_order(number: int) -> str:
    """Refund an order.

    Args:
        number: The order's number.

    Guidelines:
        - Only when asked.
    """
    return f"Order {number} refunded."


class DemoFront(Assistant):
    id = "demo_front"
    name = "Front desk"
    instructions = "You greet customers."
    model = DemoModel()
    delegates = ["demo_billing"]


class DemoBilling(Assistant):
    id = "demo_billing"
    name = "Billing"
    description = "Refunds."
    instructions = "You handle refunds."
    model = DemoModel()
    tools = [refund_order]


@pytest.fixture
def desk():
    register(DemoFront)
    register(DemoBilling)
    yield
    registry.unregister(DemoFront.id)
    registry.unregister(DemoBilling.id)


async def test_an_edited_turn_runs_its_delegate_again(desk, sockets):
    socket = await sockets()
    await socket.send(
        {
            "type": "user_message",
            "content": "ask_demo_billing refund_order 7",
            "assistant": DemoFront.id,
        }
    )
    await socket.run_to_completion()
    await socket.send({"type": "edit", "position": 0, "content": "ask_demo_billing refund_order 8"})
    await socket.run_to_completion()

    again = await sockets(socket.session_id)
    answer = again.session_frame["history"][-1]["content"]
    assert "Order 8 refunded" in answer, answer
    assert await sync_to_async(SubRun.objects.count)() == 2
