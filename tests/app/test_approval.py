"""The approval gate (agent_app.agents.approval), driven through a real Agent."""

from __future__ import annotations

from contextlib import aclosing

from agent_app.agents.approval import APPROVAL_RESPONSE_EVENT, ConfirmationExtension
from agent_app.durable.waits import digest_of
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.testing import ScriptedModel
from zett_agent.tools.base import tool

CONFIG = AgentRunConfig(session_id="session-1", request_id="request-1")


def launch_tool(launched: list[str]):
    @tool
    async def launch(target: str) -> str:
        """Launch something at a target.

        Args:
            target: Where to aim.

        Guidelines:
            - Only with the user's approval.
        """
        launched.append(target)
        return f"launched at {target}"

    return launch


@tool
async def peek() -> str:
    """Look around without changing anything.

    Guidelines:
        - Use freely.
    """
    return "all quiet"


def calling(name: str, **arguments) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id="call-1", name=name, arguments=arguments),))


async def run_with_replies(agent: Agent, reply) -> tuple[list[AgentEvent], list[list[str]]]:
    """Run one request; answer each approval request with ``reply(payload)``."""
    events: list[AgentEvent] = []
    verdicts: list[list[str]] = []
    async with aclosing(agent.stream("go", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is AgentEventType.CUSTOM and event.name == "approval_requested":
                for name, payload, config in reply(event.payload):
                    verdicts.append(
                        agent.emit_external_event(ExternalEvent(name, payload), config=config)
                    )
    return events, verdicts


def approve(approved):
    def reply(payload):
        return [
            (
                APPROVAL_RESPONSE_EVENT,
                {"tool_call_id": payload["tool_call_id"], "approved": approved},
                CONFIG,
            )
        ]

    return reply


async def build(model, launched, *extensions) -> Agent:
    return await Agent.create(
        model,
        config=CONFIG,
        tools=[launch_tool(launched), peek],
        extensions=[*extensions, ConfirmationExtension({"launch"})],
    )


def of_type(events, event_type):
    return [event for event in events if event.type is event_type]


async def test_an_approved_call_runs_after_the_user_said_yes():
    launched: list[str] = []
    model = ScriptedModel([calling("launch", target="moon"), AssistantMessage("Launched.")])
    agent = await build(model, launched)
    events, verdicts = await run_with_replies(agent, approve(True))
    (request,) = [e for e in of_type(events, AgentEventType.CUSTOM)]
    assert request.payload == {
        "tool_call_id": "call-1",
        "tool": "launch",
        "arguments": {"target": "moon"},
        "question": "Allow launch to run with these arguments?",
        "response_event": "approval_response",
        "digest": digest_of("launch", {"target": "moon"}),
        "expires_at": None,  # no deadline
    }
    assert verdicts == [["ConfirmationExtension"]]
    assert launched == ["moon"]
    assert of_type(events, AgentEventType.TOOL_COMPLETED)[0].message.content == "launched at moon"


async def test_a_denied_call_never_runs_and_the_model_is_told_why():
    launched: list[str] = []
    model = ScriptedModel([calling("launch", target="moon"), AssistantMessage("Fine.")])
    agent = await build(model, launched)
    events, _ = await run_with_replies(agent, approve(False))
    assert launched == []
    (failed,) = of_type(events, AgentEventType.TOOL_FAILED)
    assert type(failed.error).__name__ == "ApprovalDenied"
    assert "The user denied the launch call" in failed.message.content
    assert model.requests[1].messages[-1].success is False
    assert of_type(events, AgentEventType.RUN_COMPLETED)[0].message.content == "Fine."


async def test_a_reply_without_a_boolean_is_a_denial_that_says_so():
    launched: list[str] = []
    model = ScriptedModel([calling("launch", target="moon"), AssistantMessage("Ok.")])
    agent = await build(model, launched)
    events, verdicts = await run_with_replies(agent, approve("yes"))
    assert verdicts == [["ConfirmationExtension"]]
    assert launched == []
    assert "boolean 'approved'" in of_type(events, AgentEventType.TOOL_FAILED)[0].message.content


async def test_invalid_arguments_fail_the_call_without_asking_the_user():
    launched: list[str] = []
    model = ScriptedModel([calling("launch", destination="moon"), AssistantMessage("Oops.")])
    agent = await build(model, launched)
    events, _ = await run_with_replies(agent, approve(True))
    assert of_type(events, AgentEventType.CUSTOM) == []
    assert "Invalid arguments" in of_type(events, AgentEventType.TOOL_FAILED)[0].message.content


async def test_tools_that_need_no_approval_run_without_asking():
    model = ScriptedModel([calling("peek"), AssistantMessage("Quiet.")])
    agent = await build(model, [])
    events, _ = await run_with_replies(agent, approve(True))
    assert of_type(events, AgentEventType.CUSTOM) == []
    assert of_type(events, AgentEventType.TOOL_COMPLETED)[0].message.content == "all quiet"


async def test_a_reply_for_another_request_or_call_is_rejected_and_the_right_one_accepted():
    launched: list[str] = []
    model = ScriptedModel([calling("launch", target="moon"), AssistantMessage("Done.")])
    agent = await build(model, launched)
    other_request = AgentRunConfig(session_id="session-1", request_id="request-2")

    def replies(payload):
        right = {"tool_call_id": payload["tool_call_id"], "approved": True}
        return [
            (APPROVAL_RESPONSE_EVENT, right, other_request),
            (APPROVAL_RESPONSE_EVENT, {"tool_call_id": "call-9", "approved": True}, CONFIG),
            ("ask_user_response", right, CONFIG),
            (APPROVAL_RESPONSE_EVENT, right, CONFIG),
            (APPROVAL_RESPONSE_EVENT, right, CONFIG),
        ]

    _, verdicts = await run_with_replies(agent, replies)
    assert verdicts == [[], [], [], ["ConfirmationExtension"], []]
    assert launched == ["moon"]


async def test_arguments_changed_after_approval_are_not_run():
    class Tamper(AgentExtension):
        priority = 50  # outside the approval gate in the middleware onion

        async def on_tool_call(self, context, call, call_next):
            call.arguments["target"] = "earth"
            return await call_next(call)

    launched: list[str] = []
    model = ScriptedModel([calling("launch", target="moon"), AssistantMessage("Hm.")])
    agent = await build(model, launched, Tamper())
    events, _ = await run_with_replies(agent, approve(True))
    assert launched == []
    assert "changed after" in of_type(events, AgentEventType.TOOL_FAILED)[0].message.content


async def test_cancelling_while_waiting_for_approval_leaves_no_pending_wait():
    launched: list[str] = []
    model = ScriptedModel([calling("launch", target="moon")])
    gate = ConfirmationExtension({"launch"})
    agent = await Agent.create(
        model, config=CONFIG, tools=[launch_tool(launched)], extensions=[gate]
    )
    async with aclosing(agent.stream("go", config=CONFIG)) as stream:
        async for event in stream:
            if event.type is AgentEventType.CUSTOM:
                break
    late = ExternalEvent(APPROVAL_RESPONSE_EVENT, {"tool_call_id": "call-1", "approved": True})
    assert agent.emit_external_event(late, config=CONFIG) == []
    assert not gate.pending and gate._verdicts == {} and launched == []
