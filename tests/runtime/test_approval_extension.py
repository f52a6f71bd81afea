"""``zett_agent.extensions.approval.ApprovalExtension``: the approval gate without Django."""

from __future__ import annotations

import subprocess
import sys
from contextlib import aclosing

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.approval import (
    APPROVAL_REQUESTED_EVENT,
    APPROVAL_RESPONSE_EVENT,
    ApprovalExtension,
    digest_of,
)
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.testing import ScriptedModel
from zett_agent.tools.base import tool

CONFIG = AgentRunConfig(session_id="s-1", request_id="r-1")


def refund_tool(refunded: list[str]):
    @tool
    async def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: The order's number.

        Guidelines:
            - Only with the customer's approval.
        """
        refunded.append(order)
        return f"refunded {order}"

    return refund


async def run(agent: Agent, answer) -> tuple[list, list]:
    """One request; each approval request is answered with ``answer(payload)`` (a payload)."""
    events, verdicts = [], []
    async with aclosing(agent.stream("refund 42", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is AgentEventType.CUSTOM and event.name == APPROVAL_REQUESTED_EVENT:
                for payload in answer(event.payload):
                    verdicts.append(
                        agent.emit_external_event(
                            ExternalEvent(APPROVAL_RESPONSE_EVENT, payload), config=CONFIG
                        )
                    )
    return events, verdicts


async def agent_for(refunded: list[str], **options) -> Agent:
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall("call-1", "refund", {"order": "42"}),)),
            AssistantMessage(content="Done."),
        ]
    )
    return await Agent.create(
        model,
        config=CONFIG,
        tools=[refund_tool(refunded)],
        extensions=[ApprovalExtension({"refund"}, **options)],
    )


def tool_results(events):
    return [
        event.message
        for event in events
        if event.type in (AgentEventType.TOOL_COMPLETED, AgentEventType.TOOL_FAILED)
    ]


async def test_the_request_names_the_call_and_an_approval_runs_it():
    refunded: list[str] = []
    agent = await agent_for(refunded)
    seen = []

    def answer(payload):
        seen.append(payload)
        return [{"tool_call_id": "call-1", "approved": True, "digest": payload["digest"]}]

    events, verdicts = await run(agent, answer)
    assert seen == [
        {
            "tool_call_id": "call-1",
            "tool": "refund",
            "arguments": {"order": "42"},
            "digest": digest_of("refund", {"order": "42"}),
            "expires_at": None,
        }
    ]
    assert verdicts == [["ApprovalExtension"]]
    assert refunded == ["42"]
    (result,) = tool_results(events)
    assert result.success and result.attributes["reply"] == {"kind": "approval", "approved": True}


async def test_a_denied_call_does_not_run_and_the_model_hears_why():
    refunded: list[str] = []
    agent = await agent_for(refunded)
    events, _ = await run(agent, lambda p: [{"tool_call_id": "call-1", "approved": False}])
    assert refunded == []
    (result,) = tool_results(events)
    assert not result.success and "denied" in result.content
    assert events[-1].type is AgentEventType.RUN_COMPLETED


async def test_a_name_added_to_a_live_set_after_construction_is_gated():
    refunded: list[str] = []
    names: set[str] = set()
    model = ScriptedModel(
        [
            AssistantMessage(tool_calls=(ToolCall("call-1", "refund", {"order": "42"}),)),
            AssistantMessage(content="Done."),
        ]
    )
    agent = await Agent.create(
        model, config=CONFIG, tools=[refund_tool(refunded)], extensions=[ApprovalExtension(names)]
    )
    names.add("refund")  # a tool a server lists only later
    events, _ = await run(agent, lambda p: [{"tool_call_id": "call-1", "approved": False}])
    assert refunded == []
    assert [e.name for e in events if e.type is AgentEventType.CUSTOM] == [APPROVAL_REQUESTED_EVENT]


async def test_an_approval_for_other_arguments_is_refused():
    refunded: list[str] = []
    agent = await agent_for(refunded)
    forged = digest_of("refund", {"order": "43"})

    def answer(payload):
        return [
            {"tool_call_id": "call-1", "approved": True, "digest": forged},
            {"tool_call_id": "call-1", "approved": False, "digest": payload["digest"]},
        ]

    _, verdicts = await run(agent, answer)
    assert verdicts == [[], ["ApprovalExtension"]]
    assert refunded == []


async def test_a_timeout_sets_a_deadline_in_the_request():
    agent = await agent_for([], timeout=60)
    seen = []

    def answer(payload):
        seen.append(payload["expires_at"])
        return [{"tool_call_id": "call-1", "approved": True}]

    await run(agent, answer)
    assert seen[0] is not None and seen[0].endswith(("Z", "+00:00"))


def test_the_runtime_gate_imports_no_django():
    probe = (
        "import sys, zett_agent.extensions.approval; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'agent_app')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
