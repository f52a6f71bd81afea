"""A front desk and its billing delegate for the process tests' servers (``ZETT_ASSISTANTS``).

Their models answer from the conversation alone, so the process that asked and the one
that continues after a crash answer the same: the front desk asks billing for a refund,
billing calls ``refund_order`` (which needs the person's approval) and reports its result,
and the front desk answers with billing's report. The refund is a ``Note`` row: counting
the rows counts the refunds, across processes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_app.assistants import Assistant
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage
from zett_agent.model import ModelRequest
from zett_agent.testing import ScriptedModel
from zett_agent.tools.base import tool
from zett_site.models import Note


@tool
def refund_order(order: int) -> str:
    """Refund an order.

    Args:
        order: The order's number.

    Guidelines:
        - Only when asked.
    """
    Note.objects.create(title=f"refund {order}", text="refunded")
    return f"order {order} refunded"


class _Answering:
    """Calls ``call`` for a new request, answers ``<prefix><result>`` once it has one."""

    def __init__(self, prefix: str, call: ToolCall) -> None:
        self.prefix, self.call = prefix, call

    async def stream(self, request: ModelRequest) -> AsyncIterator:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            answer = AssistantMessage(f"{self.prefix}{last.content}")
        else:
            answer = AssistantMessage(tool_calls=(self.call,))
        async for event in ScriptedModel([answer]).stream(request):
            yield event


def front_model() -> _Answering:
    return _Answering("Front: ", ToolCall("ask-1", "ask_billing", {"request": "Refund 7"}))


def billing_model() -> _Answering:
    return _Answering("Billing: ", ToolCall("refund-1", "refund_order", {"order": 7}))


class FrontDesk(Assistant):
    id = "front"
    name = "Front desk"
    instructions = "You greet customers."
    model = "tests.app.team_assistants:front_model"
    delegates = ["billing"]


class Billing(Assistant):
    id = "billing"
    name = "Billing"
    instructions = "You handle refunds."
    model = "tests.app.team_assistants:billing_model"
    tools = [refund_order]
    approval_required = {"refund_order"}


def concierge_model() -> _Answering:
    return _Answering("Concierge: ", ToolCall("hand-1", "transfer_to_billing", {"reason": "money"}))


class Concierge(Assistant):
    id = "concierge"
    name = "Concierge"
    instructions = "You send people where they belong."
    model = "tests.app.team_assistants:concierge_model"
    handoffs = ["billing"]
