"""Deadlines on external-event waits: ``timeout``, ``_wait_expires_at``, ``ExternalEventExpired``.

Tiny timeouts are used where the expiry itself is the event a test awaits; no test asserts
on a duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from datetime import UTC, datetime, timedelta

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.ask_user import AskUserExtension
from zett_agent.extensions.external import (
    ExternalEvent,
    ExternalEventExpired,
    ExternalEventExtension,
)
from zett_agent.messages import ToolCall

from .confirmation import CANCELLED_TEXT, ConfirmationExtension, WaitsInBeforeRun, reply
from .support import CallThenReport, Observer, ProbeModel, answer, cancel_when, lookup

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s", request_id="r")


def asking_model() -> CallThenReport:
    return CallThenReport(ToolCall(id="ask-1", name="ask_user", arguments={"question": "Which?"}))


def answer_event(**payload) -> ExternalEvent:
    return ExternalEvent(name="ask_user_response", payload={"tool_call_id": "ask-1", **payload})


class WatchedAskUser(AskUserExtension):
    """``AskUserExtension`` that sets ``expired`` once a wait's deadline timer has fired."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.expired = asyncio.Event()

    def _expire(self, pending) -> None:
        super()._expire(pending)
        self.expired.set()


class TimedConfirmation(ConfirmationExtension):
    """The confirmation example with a deadline on its wait."""

    def __init__(self, timeout: float | None) -> None:
        ExternalEventExtension.__init__(
            self,
            response_event_name="confirmation_response",
            correlation_field="tool_call_id",
            timeout=timeout,
        )


# --- configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timeout", "error"),
    [
        pytest.param(True, TypeError, id="bool"),
        pytest.param("60", TypeError, id="str"),
        pytest.param(-1, ValueError, id="negative"),
        pytest.param(math.nan, ValueError, id="nan"),
        pytest.param(math.inf, ValueError, id="inf"),
    ],
)
def test_an_invalid_timeout_is_rejected(timeout, error):
    with pytest.raises(error, match=r"timeout must be a number of seconds >= 0, got"):
        AskUserExtension(timeout=timeout)
    with pytest.raises(error, match=r"timeout must be a number of seconds >= 0"):
        TimedConfirmation(timeout)


@pytest.mark.parametrize(("given", "kept"), [(None, None), (0, None), (3600, 3600.0), (0.5, 0.5)])
def test_the_timeout_is_readable_and_zero_means_no_deadline(given, kept):
    assert AskUserExtension(timeout=given).timeout == kept
    assert AskUserExtension().timeout is None


# --- the payload ------------------------------------------------------------------------


async def run_and_answer(extension: AskUserExtension) -> list[AgentEvent]:
    agent = await Agent.create(asking_model(), extensions=[extension])
    events: list[AgentEvent] = []
    async with contextlib.aclosing(agent.stream("help", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM:
                accepted = agent.emit_external_event(answer_event(answer="x"), config=CONFIG)
                assert accepted == [extension.name]
    return events


async def test_a_question_with_a_deadline_carries_expires_at_in_iso_utc():
    before = datetime.now(UTC)
    events = await run_and_answer(AskUserExtension(timeout=3600))
    after = datetime.now(UTC)
    (event,) = [e for e in events if e.type is T.CUSTOM]
    text = event.payload["expires_at"]
    assert event.expires_at == text
    expires_at = datetime.fromisoformat(text)
    assert expires_at.utcoffset() == timedelta(0)
    assert text == expires_at.isoformat(timespec="milliseconds")
    hour = timedelta(hours=1)
    assert before + hour - timedelta(milliseconds=1) <= expires_at <= after + hour
    assert events[-1].type is T.RUN_COMPLETED


@pytest.mark.parametrize("seconds", [None, 0])
async def test_a_question_without_a_deadline_has_no_expires_at_key(seconds):
    events = await run_and_answer(AskUserExtension(timeout=seconds))
    (event,) = [e for e in events if e.type is T.CUSTOM]
    assert "expires_at" not in event.payload
    assert event.expires_at is None


# --- expiry -----------------------------------------------------------------------------


async def test_an_unanswered_question_expires_the_tool_fails_and_the_request_goes_on():
    asking = WatchedAskUser(timeout=0.01)
    watch = Observer()
    model = asking_model()
    agent = await Agent.create(model, extensions=[asking, watch])
    events: list[AgentEvent] = []
    late: list[list[str]] = []
    async with contextlib.aclosing(agent.stream("help", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM:
                await asking.expired.wait()
                late.append(agent.emit_external_event(answer_event(answer="x"), config=CONFIG))
    assert late == [[]]
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert failed.message.success is False
    assert "Nobody answered within 0.01 seconds (deadline " in failed.message.content
    assert isinstance(failed.error, ExternalEventExpired)
    assert isinstance(failed.error, TimeoutError)
    assert failed.error.correlation_id == "ask-1"
    asked = next(e for e in events if e.type is T.CUSTOM)
    assert failed.error.expires_at.isoformat(timespec="milliseconds") == asked.expires_at
    assert model.requests[-1].messages[-1].content == failed.message.content
    assert events[-1].type is T.RUN_COMPLETED
    assert watch.errors == []


async def test_the_seed_confirmation_tool_fails_with_the_expiry_when_nobody_answers():
    agent = await Agent.create(
        CallThenReport(ToolCall(id="call-7", name="confirm")), extensions=[TimedConfirmation(0.01)]
    )
    final = await agent.run("Deploy?", config=CONFIG)
    assert final.content.startswith("False:Nobody answered within 0.01")
    assert agent.emit_external_event(reply(), config=CONFIG) == []


async def test_a_reply_in_time_wins_and_the_deadline_never_fires():
    asking = WatchedAskUser(timeout=3600)
    events = await run_and_answer(asking)
    assert not asking.expired.is_set()
    assert [e.type for e in events if e.type.value.startswith("tool_")] == [
        T.TOOL_STARTED,
        T.TOOL_COMPLETED,
    ]


async def test_a_subclass_that_takes_the_reply_in_before_tool_can_catch_the_expiry():
    caught: list[ExternalEventExpired] = []

    class TakesEarly(ExternalEventExtension):
        def __init__(self) -> None:
            super().__init__(response_event_name="go", correlation_field="id", timeout=0.01)

        async def before_tool(self, context, call) -> None:
            async with self._wait_for_external_event(context, call.id):
                assert self._wait_expires_at(context, call.id) is not None
            try:
                self._take_external_event(context)
            except ExternalEventExpired as expired:
                caught.append(expired)

    model = CallThenReport(ToolCall(id="op-1", name="lookup", arguments={"key": "k"}))
    agent = await Agent.create(model, tools=[lookup], extensions=[TakesEarly()])
    final = await agent.run("go", config=CONFIG)
    assert [error.correlation_id for error in caught] == ["op-1"]
    assert final.content == "True:value of k"


async def test_without_a_deadline_a_wait_lasts_until_it_is_cancelled():
    asked = asyncio.Event()
    watch = Observer()
    agent = await Agent.create(asking_model(), extensions=[AskUserExtension(), watch])

    async def consume():
        async with contextlib.aclosing(agent.stream("q", config=CONFIG)) as stream:
            async for event in stream:
                if event.type is T.CUSTOM:
                    assert "expires_at" not in event.payload
                    asked.set()

    await cancel_when(asked, consume())
    assert [m.content for m in watch.tool_messages] == [CANCELLED_TEXT]
    assert agent.emit_external_event(answer_event(answer="late"), config=CONFIG) == []


async def test_cancellation_cancels_a_wait_with_a_deadline_at_once():
    asked = asyncio.Event()
    watch = Observer()
    agent = await Agent.create(asking_model(), extensions=[AskUserExtension(timeout=3600), watch])

    async def consume():
        async with contextlib.aclosing(agent.stream("q", config=CONFIG)) as stream:
            async for event in stream:
                if event.type is T.CUSTOM:
                    asked.set()

    await cancel_when(asked, consume())
    assert [m.content for m in watch.tool_messages] == [CANCELLED_TEXT]


# --- the helpers ------------------------------------------------------------------------


async def test_wait_expires_at_outside_a_wait_body_is_an_error():
    async def ask_outside(extension, context):
        extension._wait_expires_at(context, "op-1")

    waits = WaitsInBeforeRun(ask_outside)
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[waits])
    await agent.run("hi", config=CONFIG)
    assert len(waits.errors) == 1
    assert isinstance(waits.errors[0], RuntimeError)
    assert "inside the _wait_for_external_event body" in str(waits.errors[0])


async def test_wait_expires_at_is_none_without_a_deadline():
    seen: list[object] = []

    async def wait_and_look(extension, context):
        async with extension._wait_for_external_event(context, "op-1"):
            seen.append(extension._wait_expires_at(context, "op-1"))
            assert extension.accept(context.config, ExternalEvent("answer", {"id": "op-1"}))

    waits = WaitsInBeforeRun(wait_and_look)
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[waits])
    await agent.run("hi", config=CONFIG)
    assert waits.errors == []
    assert seen == [None]
