"""A front desk and its billing delegate for the process tests' servers (``ZETT_ASSISTANTS``).

Their models answer from the conversation alone, so the process that asked and the one
that continues after a crash answer the same: the front desk asks billing for a refund,
billing calls ``refund_order`` (which needs the person's approval) and reports its result,
and the front desk answers with billing's report. The refund is a ``Note`` row: counting
the rows counts the refunds, across processes. The editor asks its scribe for a report:
the scribe writes it down (an ``atomic`` tool, a ``Note``) and then streams it slowly, so a
test can kill the worker while the delegate streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agent_app.assistants import Assistant
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
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


# --- a delegate that streams a long answer (the crash tests kill a worker meanwhile) -------

#: The scribe's answer, streamed a word every ``SCRIBE_PACE`` seconds.
REPORT = " ".join(f"word{number}" for number in range(60))
SCRIBE_PACE = 0.05


@tool(atomic=True)
def write_report(topic: str) -> str:
    """Write a report down.

    Args:
        topic: What the report is about.

    Guidelines:
        - Once per report.
    """
    Note.objects.create(title=f"report {topic}", text="written")
    return f"report on {topic} written"


class _Reporting:
    """Calls ``write_report`` for a new request; once it has the result, streams ``REPORT``."""

    async def stream(self, request: ModelRequest) -> AsyncIterator:
        if isinstance(request.messages[-1], ToolMessage):
            for index, word in enumerate(REPORT.split(" ")):
                await asyncio.sleep(SCRIBE_PACE)
                yield ModelEvent.text(word if index == 0 else f" {word}")
            yield ModelEvent.completed(ModelResponse(AssistantMessage(REPORT)))
            return
        call = ToolCall("write-1", "write_report", {"topic": "sales"})
        async for event in ScriptedModel([AssistantMessage(tool_calls=(call,))]).stream(request):
            yield event


def editor_model() -> _Answering:
    return _Answering("Editor: ", ToolCall("ask-2", "ask_scribe", {"request": "Report on sales"}))


def scribe_model() -> _Reporting:
    return _Reporting()


class Editor(Assistant):
    id = "editor"
    name = "Editor"
    instructions = "You edit."
    model = "tests.app.team_assistants:editor_model"
    delegates = ["scribe"]


class Scribe(Assistant):
    id = "scribe"
    name = "Scribe"
    instructions = "You write reports."
    model = "tests.app.team_assistants:scribe_model"
    tools = [write_report]
