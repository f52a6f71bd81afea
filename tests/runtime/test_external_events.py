"""``ExternalEventExtension`` end to end: the confirmation example, stale / duplicate / misrouted
replies, replies from threads, cancellation and failure, sessions sharing a tool_call_id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.external import ExternalEvent

from .confirmation import (
    ACCEPTED,
    CANCELLED_TEXT,
    ConfirmationExtension,
    Session,
    WaitsInBeforeRun,
    confirmation_agent,
    confirming_model,
    reply,
    waiting_in_a_task,
    waiting_session,
)
from .support import Observer, ProbeModel, answer, close_at

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


# --- ExternalEvent ----------------------------------------------------------------------


def test_an_external_event_needs_a_name():
    with pytest.raises(ValueError, match="name"):
        ExternalEvent(name=" ", payload={})


def test_an_external_event_payload_must_be_a_dict_with_string_keys():
    with pytest.raises(TypeError, match="payload"):
        ExternalEvent(name="x", payload=["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ExternalEvent(name="x", payload={1: "numeric key"})  # type: ignore[dict-item]


# --- the seed example end to end --------------------------------------------------------


async def test_the_seed_confirmation_example_runs_end_to_end():
    config = AgentRunConfig(session_id="session-42", request_id="request-1")
    model = confirming_model()
    agent = await Agent.create(model, config=config, extensions=[ConfirmationExtension()])
    accepted_by = []
    events = []
    async with contextlib.aclosing(agent.stream("Deploy?", config=config)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM and event.name == "confirmation_requested":
                accepted_by.append(
                    agent.emit_external_event(
                        ExternalEvent(
                            name="confirmation_response",
                            payload={
                                "tool_call_id": event.payload["tool_call_id"],
                                "approved": True,
                            },
                        ),
                        config=config,
                    )
                )
    assert accepted_by == [ACCEPTED]
    custom = next(e for e in events if e.type is T.CUSTOM)
    assert custom.session_id == "session-42"
    assert custom.payload == {"tool_call_id": "call-7", "question": "Proceed?"}
    kinds = [
        e.type
        for e in events
        if e.type not in {T.TEXT_DELTA, T.CONTENT_STARTED, T.CONTENT_COMPLETED}
    ]
    assert kinds == [
        T.MODEL_STARTED,
        T.MODEL_COMPLETED,
        T.CUSTOM,
        T.TOOL_STARTED,
        T.TOOL_COMPLETED,
        T.MODEL_STARTED,
        T.MODEL_COMPLETED,
        T.RUN_COMPLETED,
    ]
    completed = next(e for e in events if e.type is T.TOOL_COMPLETED)
    assert completed.message.success is True
    assert json.loads(completed.message.content) is True
    assert events[-1].message.content == "True:true"
    assert model.requests[0].tools[0].name == "confirm"


@pytest.mark.parametrize(
    "stream_config",
    [None, AgentRunConfig(session_id="s", request_id="r")],
    ids=["under the initialized config", "under its own config"],
)
async def test_a_reply_sent_while_the_request_event_is_being_handled_is_accepted(stream_config):
    """The consumer replies before asking for the next event: the wait already exists."""
    config = AgentRunConfig(session_id="s", request_id="r")
    agent = await confirmation_agent(config)
    order = []
    async with contextlib.aclosing(agent.stream("Deploy?", config=stream_config)) as stream:
        async for event in stream:
            order.append(event.type)
            if event.type is T.CUSTOM:
                order.append(agent.emit_external_event(reply(), config=config))
    custom = order.index(T.CUSTOM)
    assert order[custom + 1] == ACCEPTED
    assert order[custom + 2] is T.TOOL_STARTED
    assert order[-1] is T.RUN_COMPLETED


async def test_a_rejection_reaches_the_model_as_a_successful_false():
    agent, session = await waiting_session(CONFIG)
    assert agent.emit_external_event(reply(approved=False), config=CONFIG) == ACCEPTED
    assert (await session.task).content == "True:false"


# --- stale, duplicate and misrouted replies ---------------------------------------------


async def test_a_reply_before_any_request_is_rejected():
    agent = await confirmation_agent(CONFIG)
    assert agent.emit_external_event(reply(), config=CONFIG) == []


async def test_a_reply_after_the_request_finished_is_rejected():
    agent, session = await waiting_session(CONFIG)
    agent.emit_external_event(reply(), config=CONFIG)
    await session.task
    assert agent.emit_external_event(reply(), config=CONFIG) == []


async def test_a_duplicate_reply_is_rejected_and_the_first_one_wins():
    agent, session = await waiting_session(CONFIG)
    assert agent.emit_external_event(reply(approved=True), config=CONFIG) == ACCEPTED
    assert agent.emit_external_event(reply(approved=False), config=CONFIG) == []
    assert (await session.task).content == "True:true"


OWN = AgentRunConfig(session_id="s", request_id="request-2")


@pytest.mark.parametrize(
    ("event", "routed_by"),
    [
        pytest.param(reply(), AgentRunConfig(session_id="theirs"), id="for another session"),
        pytest.param(
            reply(),
            AgentRunConfig(session_id="s", request_id="request-1"),
            id="for another request of the same session",
        ),
        pytest.param(reply(call_id="call-8"), OWN, id="with an unknown correlation id"),
        pytest.param(
            ExternalEvent(
                name="other_response", payload={"tool_call_id": "call-7", "approved": True}
            ),
            OWN,
            id="wrong-name",
        ),
        pytest.param(
            ExternalEvent(name="confirmation_response", payload={"approved": True}),
            OWN,
            id="no-correlation",
        ),
        pytest.param(
            ExternalEvent(
                name="confirmation_response", payload={"tool_call_id": 7, "approved": True}
            ),
            OWN,
            id="non-string-correlation",
        ),
        pytest.param(
            ExternalEvent(
                name="confirmation_response", payload={"tool_call_id": " ", "approved": True}
            ),
            OWN,
            id="blank-correlation",
        ),
    ],
)
async def test_a_misrouted_or_malformed_reply_is_rejected_and_the_wait_survives(event, routed_by):
    agent, session = await waiting_session(OWN)
    assert agent.emit_external_event(event, config=routed_by) == []
    assert not session.task.done()
    assert agent.emit_external_event(reply(), config=OWN) == ACCEPTED
    assert (await session.task).content == "True:true"


async def test_a_reply_routed_by_session_alone_reaches_the_active_request():
    agent, session = await waiting_session(OWN)
    assert agent.emit_external_event(reply(), config=AgentRunConfig(session_id="s")) == ACCEPTED
    await session.task


async def test_accept_without_a_config_is_rejected():
    extension = ConfirmationExtension()
    _, session = await waiting_session(CONFIG, extension)
    assert extension.accept(None, reply()) is False
    assert extension.accept(AgentRunConfig(), reply()) is False
    assert extension.accept(CONFIG, reply()) is True
    await session.task


async def test_routing_ignores_ids_inside_the_payload_and_leaves_it_untouched():
    agent, session = await waiting_session(OWN)
    event = reply(session_id="elsewhere", request_id="not-this-one")
    snapshot = json.dumps(event.payload, sort_keys=True)
    assert agent.emit_external_event(event, config=OWN) == ACCEPTED
    await session.task
    assert json.dumps(event.payload, sort_keys=True) == snapshot


async def test_a_payload_that_fails_business_validation_is_still_accepted_but_fails_the_tool():
    watch = Observer()
    agent, session = await waiting_session(CONFIG, ConfirmationExtension(), watch)
    assert agent.emit_external_event(reply(approved="yes"), config=CONFIG) == ACCEPTED
    final = await session.task
    (result,) = watch.tool_messages
    assert result.success is False
    assert "approved must be a boolean" in result.content
    assert final.content.startswith("False:")
    assert watch.errors == []


# --- threads ----------------------------------------------------------------------------


async def test_a_reply_from_another_thread_wakes_the_waiting_request():
    agent, session = await waiting_session(OWN)
    accepted = await asyncio.to_thread(agent.emit_external_event, reply(), config=OWN)
    assert accepted == ACCEPTED
    assert (await session.task).content == "True:true"


async def test_a_reply_from_a_plain_thread_started_by_the_ui_callback_is_accepted():
    agent = await confirmation_agent(CONFIG)
    results: list[list[str]] = []
    threads: list[threading.Thread] = []

    async with contextlib.aclosing(agent.stream("Deploy?", config=CONFIG)) as stream:
        async for event in stream:
            if event.type is T.CUSTOM:
                thread = threading.Thread(
                    target=lambda: results.append(agent.emit_external_event(reply(), config=CONFIG))
                )
                thread.start()
                threads.append(thread)
            final = event
    await asyncio.to_thread(threads[0].join)
    assert results == [ACCEPTED]
    assert final.message.content == "True:true"


async def test_concurrent_duplicate_replies_from_threads_are_accepted_exactly_once():
    agent, session = await waiting_session(CONFIG)
    racers = 4  # at most the default executor's worker count on a 2-core machine
    start = threading.Barrier(racers)

    def racer():
        start.wait()
        return agent.emit_external_event(reply(), config=CONFIG)

    results = await asyncio.gather(*(asyncio.to_thread(racer) for _ in range(racers)))
    assert sorted(results) == [[]] * (racers - 1) + [ACCEPTED]
    await session.task


# --- cancellation and failure -----------------------------------------------------------


async def test_cancelling_a_waiting_request_cancels_the_wait_and_rejects_late_replies():
    watch = Observer()
    agent, session = await waiting_session(CONFIG, ConfirmationExtension(), watch)
    session.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await session.task
    assert agent.emit_external_event(reply(), config=CONFIG) == []
    assert [(m.tool_call_id, m.success, m.content) for m in watch.tool_messages] == [
        ("call-7", False, CANCELLED_TEXT)
    ]
    assert len(watch.cancelled) == 1
    assert watch.errors == []


async def test_closing_the_stream_at_the_request_event_rejects_late_replies():
    watch = Observer()
    agent = await confirmation_agent(CONFIG, watch)
    await close_at(agent, "Deploy?", T.CUSTOM, config=CONFIG)
    assert agent.emit_external_event(reply(), config=CONFIG) == []
    assert len(watch.cancelled) == 1
    assert [m.content for m in watch.tool_messages] == [CANCELLED_TEXT]


async def test_a_session_whose_wait_was_cancelled_can_wait_again():
    agent, first = await waiting_session(CONFIG)
    first.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first.task
    second = await Session.parked(agent, CONFIG)
    assert agent.emit_external_event(reply(), config=CONFIG) == ACCEPTED
    assert (await second.task).content == "True:true"


async def test_on_error_fails_a_pending_wait_with_the_original_error():
    boom = ConnectionError("the request failed")

    async def fail_the_request_while_waiting(extension, context):
        waiter = await waiting_in_a_task(extension, context, "op-1")
        await extension.on_error(context, boom)
        await waiter

    waits = WaitsInBeforeRun(fail_the_request_while_waiting)
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[waits])
    await agent.run("hi", config=CONFIG)
    assert waits.errors == [boom]
    assert waits.errors[0] is boom


async def test_a_request_that_fails_while_asking_leaves_no_wait_behind():
    boom = RuntimeError("could not reach the UI")

    class Flaky(ConfirmationExtension):
        async def before_tool(self, context, call):
            async with self._wait_for_external_event(context, call.id):
                raise boom

    watch = Observer()
    agent = await Agent.create(confirming_model(), config=CONFIG, extensions=[Flaky(), watch])
    with pytest.raises(RuntimeError) as caught:
        await agent.run("Deploy?", config=CONFIG)
    assert caught.value is boom
    assert watch.errors == [boom]
    assert agent.emit_external_event(reply(), config=CONFIG) == []


# --- two sessions, one tool_call_id -----------------------------------------------------


async def test_two_sessions_waiting_on_the_same_tool_call_id_get_their_own_replies():
    agent = await confirmation_agent()
    config_a = AgentRunConfig(session_id="a")
    config_b = AgentRunConfig(session_id="b")
    session_a = await Session.parked(agent, config_a)
    session_b = await Session.parked(agent, config_b)
    assert session_a.request_event.payload["tool_call_id"] == "call-7"
    assert session_b.request_event.payload["tool_call_id"] == "call-7"

    assert agent.emit_external_event(reply(approved=True), config=config_a) == ACCEPTED
    assert (await session_a.task).content == "True:true"
    assert not session_b.task.done()
    assert agent.emit_external_event(reply(approved=True), config=config_a) == []

    assert agent.emit_external_event(reply(approved=False), config=config_b) == ACCEPTED
    assert (await session_b.task).content == "True:false"


async def test_a_reply_staged_for_a_cancelled_request_is_not_seen_by_the_next_one():
    agent = await confirmation_agent(CONFIG)
    async with contextlib.aclosing(agent.stream("Deploy?", config=CONFIG)) as stream:
        async for event in stream:
            if event.type is T.CUSTOM:
                agent.emit_external_event(reply(approved=True), config=CONFIG)
            if event.type is T.TOOL_STARTED:
                break
    second = await Session.parked(agent, CONFIG)
    assert agent.emit_external_event(reply(approved=False), config=CONFIG) == ACCEPTED
    assert (await second.task).content == "True:false"
