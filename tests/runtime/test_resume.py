"""``Agent.resume_stream`` / ``resume``: continuing a session whose history ends in open calls.

Each test restores a history with ``SeededHistory`` (an inline stand-in for a persistence
extension), then resumes it with or without the replies that arrived meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from zett_agent.agent import Agent, AgentRunConfig, AgentRunContext
from zett_agent.events import AgentEvent, AgentEventType, AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.ask_user import AskUserExtension
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.external import ExternalEvent, ExternalEventExpired
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.history import valid_history
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage

from .confirmation import CANCELLED_TEXT, ConfirmationExtension, reply
from .support import (
    CallThenReport,
    HookLog,
    Observer,
    ProbeModel,
    Responder,
    SeededHistory,
    answer,
    calls,
    cancel_when,
    lookup,
    without_deltas,
)

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s", request_id="resume-1")

ASK = ToolCall(id="ask-1", name="ask_user", arguments={"question": "Which colour?"})
CONFIRM = ToolCall(id="call-7", name="confirm")
LOOKUP = ToolCall(id="call-0", name="lookup", arguments={"key": "k"})


def asked(*tool_calls: ToolCall) -> list:
    """A history whose last assistant message requested ``tool_calls`` (no results yet)."""
    return [UserMessage("help me"), AssistantMessage(tool_calls=list(tool_calls))]


def ask_reply(call_id: str = "ask-1", **payload) -> ExternalEvent:
    return ExternalEvent("ask_user_response", {"tool_call_id": call_id, **payload})


async def resume_events(agent: Agent, **kwargs) -> list[AgentEvent]:
    kwargs.setdefault("config", CONFIG)
    async with contextlib.aclosing(agent.resume_stream(**kwargs)) as stream:
        return [event async for event in stream]


def tool_results(events: list[AgentEvent]) -> list[tuple[str, bool, str]]:
    return [
        (e.message.tool_call_id, e.message.success, e.message.content)
        for e in events
        if e.type in (T.TOOL_COMPLETED, T.TOOL_FAILED, T.TOOL_SKIPPED)
    ]


# --- a reply known up front -------------------------------------------------------------


async def test_a_known_ask_user_reply_runs_the_tool_without_waiting_and_the_model_answers():
    model = CallThenReport(ASK)
    watch = Observer()
    agent = await Agent.create(
        model, extensions=[SeededHistory(*asked(ASK)), AskUserExtension(), watch]
    )
    events = await resume_events(agent, replies=[ask_reply(answer="blue")])
    assert without_deltas(events) == [
        T.CUSTOM,
        T.TOOL_STARTED,
        T.TOOL_COMPLETED,
        T.MODEL_STARTED,
        T.MODEL_COMPLETED,
        T.RUN_COMPLETED,
    ]
    question = events[0]
    assert question.name == "ask_user" and question.payload["tool_call_id"] == "ask-1"
    assert tool_results(events) == [("ask-1", True, '{"tool_call_id": "ask-1", "answer": "blue"}')]
    (request,) = model.requests
    assert isinstance(request.messages[-1], ToolMessage)
    assert events[-1].message.content == 'True:{"tool_call_id": "ask-1", "answer": "blue"}'
    assert watch.ended == ["after_turn", "after_turn", "after_run", "on_success"]
    assert list(watch.turn_results[0].tool_calls) == [ASK]
    assert agent.emit_external_event(ask_reply(answer="again"), config=CONFIG) == []


async def test_a_resume_runs_the_setup_hooks_but_no_on_message_and_appends_no_input():
    log = HookLog()
    inputs: list[object] = []

    class SeesInput(AgentExtension):
        async def before_run(self, context: AgentRunContext) -> None:
            inputs.append(context.input_message)

    model = ProbeModel(answer("done"))
    agent = await Agent.create(
        model, tools=[lookup], extensions=[SeededHistory(*asked(LOOKUP)), log, SeesInput()]
    )
    final = await agent.resume(config=CONFIG)
    assert final.content == "done"
    assert inputs == [None]
    assert log.log == [
        ("phase", "created", "loading_context"),
        "on_tool",
        "on_state",
        ("phase", "loading_context", "ready"),
        "before_run",
        "before_tool",
        ("phase", "ready", "running_tool"),
        "on_tool_call",
        ("phase", "running_tool", "ready"),
        "after_tool",
        ("appended", "tool"),
        "after_turn",
        "before_turn",
        "before_model",
        ("phase", "ready", "generating"),
        ("phase", "generating", "ready"),
        ("appended", "assistant"),
        "after_model",
        "after_turn",
        "after_run",
        "on_success",
        ("phase", "ready", "completed"),
    ]


# --- the confirmation example ------------------------------------------------------------


@pytest.mark.parametrize(("approved", "reported"), [(True, "True:true"), (False, "True:false")])
async def test_the_seed_confirmation_example_resumes_with_an_approval_or_a_denial(
    approved, reported
):
    agent = await Agent.create(
        CallThenReport(CONFIRM),
        extensions=[SeededHistory(*asked(CONFIRM)), ConfirmationExtension()],
    )
    events = await resume_events(agent, replies=[reply(approved=approved)])
    assert [e.name for e in events if e.type is T.CUSTOM] == ["confirmation_requested"]
    assert tool_results(events) == [("call-7", True, "true" if approved else "false")]
    assert events[-1].type is T.RUN_COMPLETED
    assert events[-1].message.content == reported


# --- several open calls -----------------------------------------------------------------


async def test_several_open_calls_run_in_order_one_known_reply_one_answered_live():
    history = [
        UserMessage("do it"),
        AssistantMessage(tool_calls=[LOOKUP, CONFIRM, ASK]),
        ToolMessage("call-0", "lookup", "value of k"),  # settled before the restart
    ]
    model = ProbeModel(answer("all done"))
    agent = await Agent.create(
        model,
        tools=[lookup],
        extensions=[SeededHistory(*history), ConfirmationExtension(), AskUserExtension()],
    )
    events: list[AgentEvent] = []
    verdicts: list[list[str]] = []
    async with contextlib.aclosing(
        agent.resume_stream(config=CONFIG, replies=[reply(approved=True)])
    ) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM and event.name == "ask_user":
                verdicts.append(agent.emit_external_event(ask_reply(answer="red"), config=CONFIG))
    assert verdicts == [["AskUserExtension"]]
    labels = [(e.type, e.name or (e.tool_calls[0].id if e.tool_calls else None)) for e in events]
    assert labels[:6] == [
        (T.CUSTOM, "confirmation_requested"),
        (T.TOOL_STARTED, "call-7"),
        (T.TOOL_COMPLETED, "call-7"),
        (T.CUSTOM, "ask_user"),
        (T.TOOL_STARTED, "ask-1"),
        (T.TOOL_COMPLETED, "ask-1"),
    ]
    (request,) = model.requests
    assert [m.tool_call_id for m in request.messages if isinstance(m, ToolMessage)] == [
        "call-0",
        "call-7",
        "ask-1",
    ]
    assert events[-1].message.content == "all done"


# --- rejected replies -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replies", "match"),
    [
        pytest.param([reply("call-0")], r"'confirmation_response'.*stale", id="stale"),
        pytest.param([reply("call-99")], r"'confirmation_response'.*call-99", id="wrong-id"),
        pytest.param([reply(), reply(approved=False)], "already has a reply", id="duplicate"),
        pytest.param(
            [ExternalEvent("nobody_listens", {"tool_call_id": "call-7"})],
            "no registered ExternalEventExtension accepts",
            id="unknown-name",
        ),
    ],
)
async def test_a_reply_that_answers_no_open_call_fails_the_resume(replies, match):
    history = [
        UserMessage("do it"),
        AssistantMessage(tool_calls=[LOOKUP, CONFIRM]),
        ToolMessage("call-0", "lookup", "value of k"),
    ]
    watch = Observer()
    model = ProbeModel()
    agent = await Agent.create(
        model,
        tools=[lookup],
        extensions=[SeededHistory(*history), ConfirmationExtension(), watch],
    )
    with pytest.raises(AgentProtocolError, match=match):
        await agent.resume(config=CONFIG, replies=replies)
    assert model.requests == []
    assert watch.tool_messages == []
    assert [type(error) for error in watch.errors] == [AgentProtocolError]
    assert watch.phases[-1] is AgentPhase.FAILED
    assert agent.is_conflict("s") is False


def test_replies_and_deadlines_of_the_wrong_type_are_refused_at_once():
    agent = Agent(ProbeModel())
    with pytest.raises(TypeError, match="ExternalEvent"):
        agent.resume_stream(replies=[{"tool_call_id": "call-7"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="timezone-aware"):
        agent.resume_stream(deadlines={"call-7": datetime(2030, 1, 1)})
    with pytest.raises(TypeError, match="datetime"):
        agent.resume_stream(deadlines={"call-7": 3600})  # type: ignore[dict-item]


# --- resuming without replies: the wait starts again ------------------------------------


async def test_without_a_reply_the_wait_starts_again_with_the_supplied_deadline():
    deadline = datetime.now(UTC) + timedelta(hours=2)
    agent = await Agent.create(
        CallThenReport(ASK),
        extensions=[SeededHistory(*asked(ASK)), AskUserExtension(timeout=60)],
    )
    events: list[AgentEvent] = []
    async with contextlib.aclosing(
        agent.resume_stream(config=CONFIG, deadlines={"ask-1": deadline})
    ) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM:
                assert event.payload["expires_at"] == deadline.isoformat(timespec="milliseconds")
                assert agent.emit_external_event(
                    ask_reply(answer="late but in time"), config=CONFIG
                )
    assert tool_results(events)[0][:2] == ("ask-1", True)
    assert events[-1].type is T.RUN_COMPLETED


async def test_a_deadline_already_past_expires_at_once_and_the_request_goes_on():
    deadline = datetime.now(UTC) - timedelta(minutes=5)
    agent = await Agent.create(
        CallThenReport(ASK), extensions=[SeededHistory(*asked(ASK)), AskUserExtension()]
    )
    events: list[AgentEvent] = []
    verdicts: list[list[str]] = []
    async with contextlib.aclosing(
        agent.resume_stream(config=CONFIG, deadlines={"ask-1": deadline})
    ) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM:
                verdicts.append(agent.emit_external_event(ask_reply(answer="x"), config=CONFIG))
    assert verdicts == [[]]
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert isinstance(failed.error, ExternalEventExpired)
    assert failed.error.expires_at == deadline
    assert failed.message.content.startswith("Nobody answered in time")
    assert events[-1].type is T.RUN_COMPLETED


async def test_a_known_reply_is_handed_over_even_when_the_deadline_has_passed():
    deadline = datetime.now(UTC) - timedelta(minutes=5)
    agent = await Agent.create(
        CallThenReport(CONFIRM),
        extensions=[SeededHistory(*asked(CONFIRM)), ConfirmationExtension()],
    )
    final = await agent.resume(config=CONFIG, replies=[reply()], deadlines={"call-7": deadline})
    assert final.content == "True:true"


async def test_a_reply_for_a_call_whose_extension_never_waits_is_unused():
    invalid = ToolCall(id="ask-1", name="ask_user", arguments={"question": " "})
    agent = await Agent.create(
        CallThenReport(invalid), extensions=[SeededHistory(*asked(invalid)), AskUserExtension()]
    )
    events = await resume_events(agent, replies=[ask_reply(answer="x")])
    assert [e.type for e in events if e.type is T.CUSTOM] == []
    assert tool_results(events)[0][:2] == ("ask-1", False)
    assert events[-1].type is T.RUN_COMPLETED


# --- no open calls ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([UserMessage("are you there?")], id="ends-with-a-user-message"),
        pytest.param(
            [
                UserMessage("are you there?"),
                AssistantMessage(tool_calls=[LOOKUP]),
                ToolMessage("call-0", "lookup", "value of k"),
            ],
            id="ends-with-a-settled-batch",
        ),
    ],
)
async def test_with_no_open_call_the_resume_continues_with_a_model_call(history):
    model = Responder()
    watch = Observer()
    agent = await Agent.create(model, tools=[lookup], extensions=[SeededHistory(*history), watch])
    events = await resume_events(agent)
    assert without_deltas(events) == [T.MODEL_STARTED, T.MODEL_COMPLETED, T.RUN_COMPLETED]
    assert events[-1].message.content == "re: are you there?"
    assert list(model.requests[0].messages[1:]) == history
    assert watch.ended == ["after_turn", "after_run", "on_success"]


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([], id="empty"),
        pytest.param([UserMessage("hi"), AssistantMessage("hello")], id="ends-with-an-answer"),
    ],
)
async def test_a_history_with_nothing_to_resume_fails_the_request(history):
    watch = Observer()
    model = ProbeModel()
    agent = await Agent.create(model, extensions=[SeededHistory(*history), watch])
    with pytest.raises(AgentProtocolError, match="nothing to resume"):
        await agent.resume(config=CONFIG)
    assert model.requests == []
    assert [type(error) for error in watch.errors] == [AgentProtocolError]
    assert watch.ended == []
    assert agent.get_state("s").phase is AgentPhase.FAILED


# --- claiming the session ---------------------------------------------------------------


async def test_a_resume_is_refused_while_the_session_has_an_active_request():
    asked_event = asyncio.Event()
    log = HookLog()
    agent = await Agent.create(
        CallThenReport(ASK), extensions=[SeededHistory(*asked(ASK)), AskUserExtension(), log]
    )

    async def first():
        async with contextlib.aclosing(agent.resume_stream(config=CONFIG)) as stream:
            async for event in stream:
                if event.type is T.CUSTOM:
                    asked_event.set()
                    with pytest.raises(AgentProtocolError, match="cannot start a new request"):
                        await agent.resume(config=AgentRunConfig(session_id="s"))
                    assert log.log.count("on_tool") == 1
                    agent.emit_external_event(ask_reply(answer="x"), config=CONFIG)

    await first()
    assert asked_event.is_set()


async def test_an_uninitialized_agent_cannot_resume():
    agent = Agent(ProbeModel())
    with pytest.raises(AgentProtocolError, match="not initialized"):
        await agent.resume(config=CONFIG)


async def test_a_resume_without_a_request_id_gets_a_uuid7():
    agent = await Agent.create(Responder(), extensions=[SeededHistory(UserMessage("hi"))])
    events = await resume_events(agent, config=AgentRunConfig(session_id="s"))
    assert events[-1].type is T.RUN_COMPLETED
    assert uuid.UUID(agent.get_state("s").request_id).version == 7


# --- cancellation and steering ----------------------------------------------------------


async def test_cancelling_a_resumed_wait_closes_the_open_calls_and_rejects_late_replies():
    asked_event = asyncio.Event()
    watch = Observer()
    agent = await Agent.create(
        CallThenReport(ASK),
        extensions=[SeededHistory(*asked(ASK, CONFIRM)), AskUserExtension(), watch],
    )

    async def consume():
        async with contextlib.aclosing(agent.resume_stream(config=CONFIG)) as stream:
            async for event in stream:
                if event.type is T.CUSTOM:
                    asked_event.set()

    await cancel_when(asked_event, consume())
    assert [(m.tool_call_id, m.content) for m in watch.tool_messages] == [
        ("ask-1", CANCELLED_TEXT),
        ("call-7", CANCELLED_TEXT),
    ]
    assert len(watch.cancelled) == 1
    assert watch.errors == []
    assert agent.emit_external_event(ask_reply(answer="late"), config=CONFIG) == []
    assert agent.is_conflict("s") is False


async def test_steering_during_a_resume_skips_the_remaining_calls_and_is_answered():
    model = Responder()
    agent = await Agent.create(
        model,
        tools=[lookup],
        extensions=[SeededHistory(*asked(ASK, LOOKUP)), AskUserExtension()],
    )
    events: list[AgentEvent] = []
    verdicts: list[list[str]] = []
    async with contextlib.aclosing(agent.resume_stream(config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM:
                steer = ExternalEvent("steering_message", {"content": "use green instead"})
                verdicts.append(agent.emit_external_event(steer, config=CONFIG))
                verdicts.append(agent.emit_external_event(ask_reply(answer="x"), config=CONFIG))
    assert verdicts == [["SteeringExtension"], ["AskUserExtension"]]
    assert without_deltas(events) == [
        T.CUSTOM,
        T.TOOL_STARTED,
        T.TOOL_COMPLETED,
        T.TOOL_SKIPPED,
        T.STEERING_STARTED,
        T.MODEL_STARTED,
        T.MODEL_COMPLETED,
        T.STEERING_COMPLETED,
        T.RUN_COMPLETED,
    ]
    assert events[-1].message.content == "re: use green instead"


# --- history helpers --------------------------------------------------------------------


def test_valid_history_keeps_an_open_tail_only_when_asked():
    partial = ToolMessage("call-0", "lookup", "value of k")
    history = [UserMessage("do it"), AssistantMessage(tool_calls=[LOOKUP, CONFIRM]), partial]
    assert valid_history(history) == history[:1]
    assert valid_history(history, keep_open_tail=True) == history
    earlier_open = [*history, UserMessage("and now?")]
    assert valid_history(earlier_open, keep_open_tail=True) == [history[0], earlier_open[-1]]


async def test_the_in_memory_history_keeps_an_open_batch_for_a_resume():
    class FailsOnce(AgentExtension):
        failed = False

        async def before_tool(self, context, call) -> None:
            if not self.failed:
                self.failed = True
                raise ConnectionError("the worker died")

    memory = InMemoryMessageAccumulator()
    model = ProbeModel(calls(LOOKUP), answer("found it"))
    agent = await Agent.create(model, tools=[lookup], extensions=[memory, FailsOnce()])
    with pytest.raises(ConnectionError):
        await agent.run("look it up", config=AgentRunConfig(session_id="s"))
    final = await agent.resume(config=AgentRunConfig(session_id="s"))
    assert final.content == "found it"
    assert [type(m).__name__ for m in memory.messages("s")] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
    ]


async def test_the_context_says_whether_the_request_is_a_resume():
    seen: list[bool] = []

    class Looks(AgentExtension):
        async def on_state(self, context):
            seen.append(context.resuming)

    agent = await Agent.create(Responder(), extensions=[SeededHistory(UserMessage("hi")), Looks()])
    await agent.run("hello", config=CONFIG)
    await agent.resume(config=AgentRunConfig(session_id="s"))
    assert seen == [False, True]
