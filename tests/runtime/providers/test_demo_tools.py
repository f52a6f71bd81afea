"""The demo model calls any tool it is offered when a message names it, with arguments from
the message and the tool's schema; its own tools keep their behaviour."""

from __future__ import annotations

import pytest

from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from zett_agent.model import ModelRequest
from zett_agent.providers.demo import OFFLINE_ANSWER, DemoModel
from zett_agent.providers.demo_tools import named_tool_call
from zett_agent.tools.base import tool


@tool(guidelines=["Use for orders."])
async def lookup_order(number: int) -> str:
    """Look up an order.

    Args:
        number: The order number.
    """
    return f"order {number}"


@tool(guidelines=["Use to send mail."])
async def send_mail(to: str, subject: str, urgent: bool = False, cc: list[str] | None = None):
    """Send mail.

    Args:
        to: The address.
        subject: The subject.
        urgent: Whether to hurry.
        cc: Copies.
    """


@tool(guidelines=["Use for a price."])
async def price(amount: float, item: str) -> str:
    """Price an item.

    Args:
        amount: How many.
        item: What.
    """
    return "1"


TOOLS = [t.definition for t in (lookup_order, send_mail, price)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lookup order 7", ("lookup_order", {"number": 7})),
        ("Please LOOKUP_ORDER for 12?", ("lookup_order", {"number": 12})),
        ("Can you lookup order 8.", ("lookup_order", {"number": 8})),
        ("lookup-order(number=3)", ("lookup_order", {"number": 3})),
        (
            "send mail to=bob@example.org subject='Hello there' urgent=yes",
            ("send_mail", {"to": "bob@example.org", "subject": "Hello there", "urgent": True}),
        ),
        ('send_mail to: a@b.c subject: Hi cc=["x@y.z"]', None),
        ("send mail about the invoice", ("send_mail", {"to": "invoice"})),
        ("price 2.5 red apples", ("price", {"amount": 2.5, "item": "red apples"})),
        ("lookup order", ("lookup_order", {})),
        ("what is a lookup orderly?", None),
        ("hello", None),
    ],
)
def test_arguments_come_from_the_message_and_the_schema(text, expected):
    found = named_tool_call(text, TOOLS)
    if text.startswith("send_mail to:"):
        assert found == (
            "send_mail",
            {"to": "a@b.c", "subject": "Hi", "cc": ["x@y.z"]},
        )
    else:
        assert found == expected


def test_skipped_tools_are_never_called():
    assert named_tool_call("lookup order 7", TOOLS, skip={"lookup_order"}) is None


async def answer(*messages, tools=TOOLS):
    request = ModelRequest(messages=tuple(messages), tools=tuple(tools))
    events = [event async for event in DemoModel().stream(request)]
    return events[-1].response.message


async def test_the_demo_calls_a_named_tool_and_reports_its_result():
    asked = UserMessage("lookup order 7")
    first = await answer(asked)
    (call,) = first.tool_calls
    assert (call.name, call.arguments) == ("lookup_order", {"number": 7})
    result = ToolMessage(call.id, call.name, "Order 7: Red shoes")
    second = await answer(asked, first, result)
    assert second.content == "The lookup_order tool returned: Order 7: Red shoes"
    assert not second.tool_calls


async def test_a_failed_call_is_reported_with_its_reason():
    asked = UserMessage("lookup order 7")
    call = ToolCall("demo_call_1", "lookup_order", {"number": 7})
    failed = ToolMessage(call.id, call.name, "ApprovalDenied: the user denied it", success=False)
    reply = await answer(asked, AssistantMessage(tool_calls=(call,)), failed)
    assert reply.content == "The lookup_order tool failed: the user denied it"


async def test_with_no_tool_named_it_lists_the_tools_it_would_call():
    reply = await answer(UserMessage("hi"))
    assert reply.content.startswith(OFFLINE_ANSWER)
    assert "`lookup_order`, `send_mail`, `price`" in reply.content
    assert (await answer(UserMessage("hi"), tools=[])).content == OFFLINE_ANSWER


async def test_its_own_tools_keep_their_behaviour():
    from zett_site.tools import demo_tools

    reply = await answer(UserMessage("calculate 2 + 3"), tools=[t.definition for t in demo_tools()])
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("calculate", {"expression": "2 + 3"})
    ]
