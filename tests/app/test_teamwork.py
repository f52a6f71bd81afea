"""Assistants that work together, through the real ASGI app: delegates as sub-runs, their
approvals as the chat's waits, handoffs, permissions, depth and cycles."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.test import override_settings
from django.utils import timezone

from agent_app.agui.interrupts import replies_for
from agent_app.agui.run_input import parse_run_input
from agent_app.assistants import Assistant, register, registry
from agent_app.durable.store import RowMeta, append_rows
from agent_app.durable.waits import digest_of, record_wait
from agent_app.models import (
    ChatRun,
    ChatSession,
    ReplyWait,
    SubRun,
    SubRunStatus,
    TokenUsage,
    WaitStatus,
)
from tests.app.conftest import answer_of, events_of, new_browser, rows
from tests.app.llm_doubles import call_tool, say
from tests.app.telemetry_support import global_exporter
from tests.app.test_agui_encoder import Recording, parse, validate
from zett_agent.messages import AssistantMessage, ToolCall, UserMessage
from zett_agent.model import ModelUsage
from zett_agent.serialization import message_to_dict
from zett_agent.testing import ScriptedModel
from zett_agent.tools.base import tool

pytestmark = pytest.mark.django_db(transaction=True)

REFUNDS: list[int] = []


@tool
async def lookup_order(order: int) -> str:
    """Look an order up.

    Args:
        order: The order's number.

    Guidelines:
        - Use freely.
    """
    return f"order {order}: paid 40 EUR"


@tool
async def refund_order(order: int) -> str:
    """Refund an order.

    Args:
        order: The order's number.

    Guidelines:
        - Only when asked.
    """
    REFUNDS.append(order)
    return f"order {order} refunded"


class Front(Assistant):
    id = "front"
    name = "Front desk"
    instructions = "You are the front desk."
    delegates = ["billing"]
    handoffs = ["billing"]


class Billing(Assistant):
    id = "billing"
    name = "Billing"
    description = "Refunds and invoices."
    instructions = "You are billing."
    tools = [lookup_order, refund_order]
    approval_required = {"refund_order"}
    delegates = ["front"]  # a cycle: never offered inside front's run


@pytest.fixture
def team():
    """Register Front and Billing; ``team(billing=[turns])`` scripts billing's model."""
    REFUNDS.clear()
    register(Front)
    register(Billing)

    def script(*turns: Any) -> ScriptedModel:
        model = ScriptedModel(list(turns))
        registry.get("billing").model = model
        return model

    yield script
    registry.unregister("front")
    registry.unregister("billing")


def tool_names(request) -> set[str]:
    return {definition.name for definition in request.tools}


async def test_a_delegate_runs_with_its_own_tools_and_its_answer_is_the_result(
    sockets, use_model, team
):
    front = use_model(
        ScriptedModel(
            [call_tool("ask_billing", "p-1", request="Is order 7 paid?"), say("Yes, it is paid.")]
        )
    )
    billing = team(call_tool("lookup_order", "b-1", order=7), say("Order 7: paid 40 EUR."))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Is 7 paid?", "assistant": "front"})
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Yes, it is paid."
    events = events_of(frames)
    nested = [event for event in events if "agent" in event]
    assert {(e["agent"], e["parent_tool_call_id"]) for e in nested} == {("billing", "p-1")}
    assert [e["tool_calls"][0]["name"] for e in nested if e["type"] == "tool_completed"] == [
        "lookup_order"
    ]
    front_results = [
        e["message"]["content"]
        for e in events
        if e["type"] == "tool_completed" and "agent" not in e
    ]
    assert front_results == ["Order 7: paid 40 EUR."]
    # Each assistant saw its own instructions and tools; billing saw only the request.
    assert "ask_billing" in tool_names(front.requests[0])
    assert "lookup_order" not in tool_names(front.requests[0])
    assert {"lookup_order", "refund_order"} <= tool_names(billing.requests[0])
    assert "ask_front" not in tool_names(billing.requests[0])  # no cycle
    assert billing.requests[0].messages[0].content.startswith("You are billing.")
    assert billing.requests[0].messages[-1].content == "Is order 7 paid?"
    # The chat's history is the front desk's; the sub-run kept its own.
    sub = await SubRun.objects.aget(session_id=socket.session_id)
    assert (sub.assistant, sub.status, sub.answer) == (
        "billing",
        SubRunStatus.COMPLETED,
        "Order 7: paid 40 EUR.",
    )
    assert [m["role"] for m in sub.messages] == ["user", "assistant", "tool", "assistant"]
    run = await ChatRun.objects.aget(session_id=socket.session_id)
    assert run.usage  # the sub-run's tokens are the run's too


async def test_a_delegate_the_person_may_not_use_is_not_offered(
    sockets, use_model, team, monkeypatch
):
    monkeypatch.setattr(Billing, "permission_required", "agent_app.view_chatsession")
    front = use_model(ScriptedModel([say("I cannot ask billing.")]))
    team()
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    await socket.run_to_completion()
    assert "ask_billing" not in tool_names(front.requests[0])
    assert "transfer_to_billing" not in tool_names(front.requests[0])


async def test_a_person_with_the_permission_is_offered_the_delegate(
    sockets, use_model, team, monkeypatch, login_cookie
):
    monkeypatch.setattr(Billing, "permission_required", "agent_app.view_chatsession")
    front = use_model(ScriptedModel([say("Asking.")]))
    team()
    user, cookie = await login_cookie("clerk")
    await user.user_permissions.aadd(await Permission.objects.aget(codename="view_chatsession"))
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    await socket.run_to_completion()
    assert {"ask_billing", "transfer_to_billing"} <= tool_names(front.requests[0])


async def test_an_approval_inside_a_delegate_is_the_chats_wait_answered_from_another_socket(
    sockets, use_model, team
):
    use_model(
        ScriptedModel([call_tool("ask_billing", "p-1", request="Refund 7"), say("Refunded.")])
    )
    team(call_tool("refund_order", "b-1", order=7), say("Order 7 refunded."))
    first = await sockets()
    await first.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    asked = (await first.until_event("custom", "approval_requested"))[-1]["event"]
    assert (asked["agent"], asked["parent_tool_call_id"]) == ("billing", "p-1")
    assert asked["payload"]["tool_call_id"] == "b-1" and asked["payload"]["agent"] == "billing"
    wait = await ReplyWait.objects.aget(session_id=first.session_id, tool_call_id="b-1")
    assert wait.status == WaitStatus.OPEN and wait.payload["parent_tool_call_id"] == "p-1"
    assert REFUNDS == []
    second = await sockets(first.session_id)
    replayed = await second.until_event("custom", "approval_requested")
    digest = replayed[-1]["event"]["payload"]["digest"]
    approve = {"tool_call_id": "b-1", "approved": True, "digest": digest}
    await second.send({"type": "external_event", "name": "approval_response", "payload": approve})
    result = await second.expect("external_event_result")
    assert result["accepted_by"] == ["ConfirmationExtension"]
    frames = await first.run_to_completion()
    assert answer_of(frames) == "Refunded."
    assert REFUNDS == [7]
    assert {w.status async for w in ReplyWait.objects.filter(session_id=first.session_id)} == {
        WaitStatus.DONE
    }


async def test_a_denied_approval_inside_a_delegate_runs_nothing_and_the_front_goes_on(
    sockets, use_model, team
):
    use_model(
        ScriptedModel([call_tool("ask_billing", "p-1", request="Refund 7"), say("Not refunded.")])
    )
    billing = team(call_tool("refund_order", "b-1", order=7), say("The refund was declined."))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    asked = (await socket.until_event("custom", "approval_requested"))[-1]["event"]
    deny = {"tool_call_id": "b-1", "approved": False, "digest": asked["payload"]["digest"]}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": deny})
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Not refunded."
    assert REFUNDS == []
    assert billing.requests[-1].messages[-1].success is False


async def test_a_handoff_moves_the_chat_and_the_new_assistant_answers_the_rest_of_the_turn(
    sockets, use_model, team
):
    model = use_model(
        ScriptedModel(
            [
                call_tool("transfer_to_billing", "h-1", reason="A refund"),
                say("Billing here: I can refund order 7."),
                say("Billing again."),
            ]
        )
    )
    team()
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Billing here: I can refund order 7."
    assert [f["type"] for f in frames].count("run_started") == 1  # one turn, one run
    moved = next(e for e in events_of(frames) if e["type"] == "tool_completed")
    assert moved["message"]["attributes"]["handoff"] == {
        "from": "front",
        "to": "billing",
        "name": "Billing",
        "reason": "A refund",
    }
    assert (await ChatSession.objects.aget(pk=socket.session_id)).assistant == "billing"
    assert [role for role, _ in await rows(socket.session_id)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    # The rest of the turn was billing's: its instructions and tools, the whole chat.
    second = model.requests[1]
    assert second.messages[0].content.startswith("You are billing.")
    assert "refund_order" in tool_names(second)
    assert "transfer_to_billing" not in tool_names(second)
    # The next turn is billing's too.
    await socket.send({"type": "user_message", "content": "And 8?"})
    assert answer_of(await socket.run_to_completion()) == "Billing again."
    assert model.requests[2].messages[0].content.startswith("You are billing.")


async def test_a_turn_edited_after_a_handoff_is_answered_by_the_chats_assistant_now(
    sockets, use_model, team
):
    """A handoff moves the chat, not one turn: a new version of a turn from before it is
    answered by the assistant the chat was handed to (docs/embedding.md says so)."""
    model = use_model(
        ScriptedModel(
            [
                call_tool("transfer_to_billing", "h-1", reason="A refund"),
                say("Billing here."),
                say("Billing on the edited turn."),
            ]
        )
    )
    team()
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    await socket.run_to_completion()
    await socket.send({"type": "edit", "position": 0, "content": "Refund 8"})
    assert answer_of(await socket.run_to_completion()) == "Billing on the edited turn."
    assert model.requests[-1].messages[0].content.startswith("You are billing.")
    assert (await ChatSession.objects.aget(pk=socket.session_id)).assistant == "billing"


async def test_delegation_stops_at_the_depth_limit(sockets, use_model, team, settings):
    settings.ZETT_MAX_DELEGATION_DEPTH = 0
    front = use_model(ScriptedModel([say("Alone.")]))
    team()
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    await socket.run_to_completion()
    assert "ask_billing" not in tool_names(front.requests[0])
    assert "transfer_to_billing" in tool_names(front.requests[0])  # handing over is no depth


# --- a sub-run that outlives its process ------------------------------------------------------


@sync_to_async
def _leave_a_delegate_waiting(browser_key: str, expires_in: float | None = None) -> tuple[str, str]:
    """The rows a chat's run leaves when its process dies while its billing sub-run waits
    for the approval of a refund."""
    session = ChatSession.objects.create(title="Refund", browser_key=browser_key, assistant="front")
    request_id = str(uuid.uuid4())
    ChatRun.objects.create(request_id=request_id, session=session, worker="dead:1:boot")
    ask = ToolCall("p-1", "ask_billing", {"request": "Refund order 7"})
    append_rows(
        str(session.pk),
        request_id,
        [(UserMessage("Refund 7"), RowMeta()), (AssistantMessage(tool_calls=(ask,)), RowMeta())],
    )
    refund = ToolCall("b-1", "refund_order", {"order": 7})
    SubRun.objects.create(
        session=session,
        parent_tool_call_id="p-1",
        root_tool_call_id="p-1",
        assistant="billing",
        request_id=request_id,
        messages=[
            message_to_dict(UserMessage("Refund order 7")),
            message_to_dict(AssistantMessage(tool_calls=(refund,))),
        ],
    )
    payload = {
        "tool_call_id": "b-1",
        "tool": "refund_order",
        "arguments": {"order": 7},
        "question": "Allow refund_order to run with these arguments?",
        "response_event": "approval_response",
        "digest": digest_of("refund_order", {"order": 7}),
        "agent": "billing",
        "parent_tool_call_id": "p-1",
    }
    if expires_in is not None:
        payload["expires_at"] = (timezone.now() + timedelta(seconds=expires_in)).isoformat()
    record_wait(str(session.pk), request_id, "approval_requested", payload)
    return str(session.pk), request_id


async def test_an_approval_inside_a_delegate_survives_a_restart_and_the_front_answers(
    sockets, use_model, team
):
    front = use_model(ScriptedModel([say("Refunded: order 7.")]))
    billing = team(say("Order 7 refunded."))
    cookie, key = await new_browser()
    session_id, request_id = await _leave_a_delegate_waiting(key)
    socket = await sockets(session_id, cookie=cookie)
    frame = socket.session_frame
    assert [run["status"] for run in frame["runs"]] == ["paused"]
    [pending] = frame["pending"]
    assert (pending["tool_call_id"], pending["kind"], pending["agent"]) == (
        "b-1",
        "approval",
        "billing",
    )
    assert pending["parent_tool_call_id"] == "p-1"
    approve = {"tool_call_id": "b-1", "approved": True, "digest": pending["payload"]["digest"]}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": approve})
    result = await socket.expect("external_event_result")
    assert result["accepted_by"] == ["ConfirmationExtension"]
    started = await socket.until(lambda f: f["type"] == "run_started")
    assert (started[-1]["kind"], started[-1]["resumed_from"]) == ("resume", request_id)
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Refunded: order 7."
    assert REFUNDS == [7]  # once
    nested = [e for e in events_of(frames) if e.get("agent") == "billing"]
    assert "tool_completed" in [e["type"] for e in nested]
    # Billing went on from its stored conversation with the tool's result.
    assert billing.requests[0].messages[-1].content == "order 7 refunded"
    assert front.requests[0].messages[-1].content == "Order 7 refunded."
    sub = await SubRun.objects.aget(session_id=session_id)
    assert sub.status == SubRunStatus.COMPLETED
    assert {w.status async for w in ReplyWait.objects.filter(session_id=session_id)} == {
        WaitStatus.DONE
    }


async def test_a_delegates_expired_approval_expires_the_chats_run(sockets, use_model, team):
    use_model(ScriptedModel())
    team()
    cookie, key = await new_browser()
    session_id, _ = await _leave_a_delegate_waiting(key, expires_in=-1)
    socket = await sockets(session_id, cookie=cookie)
    assert [run["status"] for run in socket.session_frame["runs"]] == ["expired"]
    assert socket.session_frame["pending"] == []
    assert REFUNDS == []


# --- AG-UI ----------------------------------------------------------------------------------


async def test_a_delegates_work_and_approval_make_a_valid_agui_stream(sockets, use_model, team):
    use_model(
        ScriptedModel([call_tool("ask_billing", "p-1", request="Refund 7"), say("Refunded.")])
    )
    team(call_tool("refund_order", "b-1", order=7), say("Order 7 refunded."))
    socket = await sockets()
    recording = Recording(socket.session_id)
    await socket.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    recording.add(await socket.until_event("custom", "approval_requested"))
    finished = recording.live()[-1].data
    assert finished["type"] == "RUN_FINISHED"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert (interrupt["id"], interrupt["reason"]) == ("b-1", "confirmation")
    assert interrupt["metadata"]["zett"]["payload"]["agent"] == "billing"
    body = {
        "threadId": recording.thread_id,
        "runId": "client-run-2",
        "messages": [],
        "resume": [{"interruptId": "b-1", "status": "resolved", "payload": {"approved": True}}],
    }
    (reply,) = replies_for(parse_run_input(json.dumps(body)).resume, {"b-1": "approval"})
    await socket.send({"type": "external_event", "name": reply.name, "payload": reply.payload})
    assert (await socket.expect("external_event_result"))["accepted_by"]
    recording.add(await socket.run_to_completion())
    events = recording.live()
    for event in events:
        parse(event)
    await validate(events)
    nested = [e for e in events if e.type == "CUSTOM" and "agent" in (e.data.get("value") or {})]
    assert {e.data["value"]["parent_tool_call_id"] for e in nested} == {"p-1"}
    assert "zett.text_delta" in {e.data["name"] for e in nested}
    # The front's own tool call is a tool call; billing's work is inside it, as CUSTOM events.
    assert [e.data["toolCallId"] for e in events if e.type == "TOOL_CALL_RESULT"] == ["p-1"]
    assert events[-1].data["outcome"] == {"type": "success"}
    assert REFUNDS == [7]


# --- budgets --------------------------------------------------------------------------------

CALL = ModelUsage(input_tokens=60, output_tokens=40)


async def test_a_sub_runs_tokens_count_to_the_persons_budget(sockets, use_model, team, settings):
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 1000}
    use_model(
        ScriptedModel(
            [call_tool("ask_billing", "p-1", request="Is 7 paid?"), say("Yes.")], usage=CALL
        )
    )
    billing = team()
    billing.add(call_tool("lookup_order", "b-1", order=7), say("Paid."))
    billing.usage = CALL
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Is 7 paid?", "assistant": "front"})
    assert answer_of(await socket.run_to_completion()) == "Yes."
    (row,) = [row async for row in TokenUsage.objects.all()]
    assert (row.total_tokens, row.calls, row.in_flight) == (400, 4, 0)
    run = await ChatRun.objects.aget(session_id=socket.session_id)
    assert run.usage["input_tokens"] == 240


async def test_a_budget_spent_inside_a_sub_run_stops_the_run(sockets, use_model, team, settings):
    settings.ZETT_TOKEN_BUDGETS = {"anonymous": 200}
    front = use_model(
        ScriptedModel(
            [call_tool("ask_billing", "p-1", request="Is 7 paid?"), say("never")], usage=CALL
        )
    )
    billing = team()
    billing.add(call_tool("lookup_order", "b-1", order=7), say("never"))
    billing.usage = CALL
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Is 7 paid?", "assistant": "front"})
    frames = await socket.until(lambda frame: frame["type"] in ("run_failed", "run_completed"))
    assert frames[-1]["type"] == "run_failed" and frames[-1]["status"] == "budget_exceeded"
    assert (len(front.requests), len(billing.requests)) == (1, 1)
    (row,) = [row async for row in TokenUsage.objects.all()]
    assert (row.total_tokens, row.in_flight) == (200, 0)


# --- traces and metrics -------------------------------------------------------------------


async def test_a_sub_run_is_an_invoke_agent_span_under_its_tool_call(sockets, use_model, team):
    with override_settings(ZETT_OTEL=True):
        spans = global_exporter()
        use_model(
            ScriptedModel([call_tool("ask_billing", "p-1", request="Is 7 paid?"), say("Yes.")])
        )
        team(call_tool("lookup_order", "b-1", order=7), say("Paid."))
        socket = await sockets()
        await socket.send({"type": "user_message", "content": "Paid?", "assistant": "front"})
        await socket.run_to_completion()
        (run,) = await spans.wait_for("invoke_agent front")
        (sub,) = await spans.wait_for("invoke_agent billing")
    ask = next(s for s in spans.get_finished_spans() if s.name == "execute_tool ask_billing")
    lookup = next(s for s in spans.get_finished_spans() if s.name == "execute_tool lookup_order")
    assert ask.parent.span_id == run.context.span_id
    assert sub.parent.span_id == ask.context.span_id
    assert lookup.parent.span_id == sub.context.span_id
    assert {s.context.trace_id for s in (run, ask, sub, lookup)} == {run.context.trace_id}
    assert sub.attributes["gen_ai.conversation.id"] == socket.session_id


async def test_a_sub_runs_tool_calls_and_tokens_are_labelled_with_its_assistant(
    sockets, use_model, team
):
    from agent_app.telemetry import metrics

    if not metrics.ENABLED:
        pytest.skip("prometheus-client is not installed")
    use_model(ScriptedModel([call_tool("ask_billing", "p-1", request="Is 7 paid?"), say("Yes.")]))
    billing = team(call_tool("lookup_order", "b-1", order=7), say("Paid."))
    billing.usage = CALL
    calls = metrics.TOOL_CALLS.labels("billing", "lookup_order", "completed")
    asks = metrics.TOOL_CALLS.labels("front", "ask_billing", "completed")
    tokens = metrics.TOKENS.labels("billing", "ScriptedModel", "input")
    before = (calls._value.get(), asks._value.get(), tokens._value.get())
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Paid?", "assistant": "front"})
    await socket.run_to_completion()
    after = (calls._value.get(), asks._value.get(), tokens._value.get())
    assert (after[0] - before[0], after[1] - before[1], after[2] - before[2]) == (1, 1, 120)


# --- chains ---------------------------------------------------------------------------------


class Ledger(Assistant):
    id = "ledger"
    name = "Ledger"
    instructions = "You keep the books."
    delegates = ["billing"]  # billing is running in the chain: never offered there


@pytest.fixture
def ledger(team):
    register(Ledger)
    registry.get("billing").delegates = ["ledger", "front"]

    def script(*turns: Any) -> ScriptedModel:
        model = ScriptedModel(list(turns))
        registry.get("ledger").model = model
        return model

    yield script
    registry.unregister("ledger")


async def test_a_delegate_asks_its_own_delegate_and_every_event_names_its_agent(
    sockets, use_model, team, ledger
):
    use_model(ScriptedModel([call_tool("ask_billing", "p-1", request="Books?"), say("Done.")]))
    billing = team(call_tool("ask_ledger", "b-1", request="Balance?"), say("Balance is 40."))
    books = ledger(say("40 EUR."))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Books?", "assistant": "front"})
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Done."
    marks = {(e["agent"], e["parent_tool_call_id"]) for e in events_of(frames) if "agent" in e}
    assert marks == {("billing", "p-1"), ("ledger", "b-1")}
    assert "ask_ledger" in tool_names(billing.requests[0])
    assert "ask_front" not in tool_names(billing.requests[0])  # front is running
    assert "ask_billing" not in tool_names(books.requests[0])  # so is billing
    rows = {row.parent_tool_call_id: row async for row in SubRun.objects.all()}
    assert (rows["b-1"].depth, rows["b-1"].root_tool_call_id) == (2, "p-1")


async def test_the_depth_limit_hides_the_next_level(sockets, use_model, team, ledger, settings):
    settings.ZETT_MAX_DELEGATION_DEPTH = 1
    use_model(ScriptedModel([call_tool("ask_billing", "p-1", request="Books?"), say("Done.")]))
    billing = team(say("No ledger for me."))
    ledger()
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Books?", "assistant": "front"})
    assert answer_of(await socket.run_to_completion()) == "Done."
    assert "ask_ledger" not in tool_names(billing.requests[0])


async def test_a_delegate_call_that_would_close_a_cycle_fails_with_a_clear_error(
    sockets, use_model, team
):
    # A model that names a tool it was not offered gets the runtime's refusal; a chain
    # that reaches a delegate anyway (a stale offer) is refused by the tool itself.
    from agent_app.agents.subruns import CHAIN, Link, _outer_chain

    token = CHAIN.set((Link("front", None, "r"), Link("billing", "p-1", "r")))
    try:
        with pytest.raises(ValueError, match=r"front is already working on this request"):
            _outer_chain("billing", registry.get("front") or Front(), "r")
    finally:
        CHAIN.reset(token)


async def test_stopping_the_run_while_a_delegate_waits_cancels_its_wait(sockets, use_model, team):
    use_model(ScriptedModel([call_tool("ask_billing", "p-1", request="Refund 7")]))
    team(call_tool("refund_order", "b-1", order=7))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Refund 7", "assistant": "front"})
    await socket.until_event("custom", "approval_requested")
    await socket.send({"type": "cancel"})
    await socket.until(lambda frame: frame["type"] == "run_cancelled")
    assert REFUNDS == []
    wait = await ReplyWait.objects.aget(session_id=socket.session_id, tool_call_id="b-1")
    assert wait.status == WaitStatus.CANCELLED
    run = await ChatRun.objects.aget(session_id=socket.session_id)
    assert run.status == "cancelled"


def test_check_names_a_delegate_or_handoff_that_is_no_registered_assistant(team):
    from agent_app.checks import check_assistants

    class Lost(Assistant):
        id = "lost"
        delegates = ["nobody"]
        handoffs = ["lost"]

    register(Lost)
    try:
        messages = [m.msg for m in check_assistants() if m.id == "zett.E023"]
    finally:
        registry.unregister("lost")
    assert messages == [
        "Assistant 'lost' (test_check_names_a_delegate_or_handoff_that_is_no_registered_assistant"
        ".<locals>.Lost) lists 'nobody' in delegates, which is no registered assistant.",
        "Assistant 'lost' (test_check_names_a_delegate_or_handoff_that_is_no_registered_assistant"
        ".<locals>.Lost) lists 'lost' in handoffs, which is itself.",
    ]


async def test_a_delegates_question_is_the_chats_and_its_answer_goes_to_the_delegate(
    sockets, use_model, team
):
    use_model(ScriptedModel([call_tool("ask_billing", "p-1", request="Refund?"), say("Done.")]))
    billing = team(
        call_tool("ask_user", "q-1", question="Which order?"),
        lambda request: say(f"Order {request.messages[-1].content} it is."),
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Refund", "assistant": "front"})
    asked = (await socket.until_event("custom", "ask_user"))[-1]["event"]
    assert (asked["agent"], asked["payload"]["question"]) == ("billing", "Which order?")
    answer = {"tool_call_id": "q-1", "answer": "7"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": answer})
    result = await socket.expect("external_event_result")
    assert result["accepted_by"] == ["AskUserExtension"]
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Done."
    ask = [e for e in events_of(frames) if e["type"] == "tool_completed" and "agent" not in e]
    assert ask[0]["message"]["content"] == "Order 7 it is."
    assert len(billing.requests) == 2


@sync_to_async
def _mark_started(session_id: str) -> None:
    ReplyWait.objects.filter(session_id=session_id, tool_call_id="b-1").update(
        status=WaitStatus.EXECUTING
    )


async def test_a_delegates_tool_that_had_started_when_the_process_died_never_runs_again(
    sockets, use_model, team, settings
):
    settings.ZETT_RUN_ATTEMPTS = 1  # settled, not continued: what became of the calls
    use_model(ScriptedModel())
    team()
    cookie, key = await new_browser()
    session_id, _ = await _leave_a_delegate_waiting(key)
    await _mark_started(session_id)  # approved, and running when the process died
    socket = await sockets(session_id, cookie=cookie)
    assert [run["status"] for run in socket.session_frame["runs"]] == ["interrupted"]
    assert socket.session_frame["pending"] == []
    (closed,) = [m for m in socket.session_frame["history"] if m["role"] == "tool"]
    assert closed["tool_call_id"] == "p-1" and "may or may not have completed" in closed["content"]
    assert REFUNDS == []
    wait = await ReplyWait.objects.aget(session_id=session_id, tool_call_id="b-1")
    assert wait.status == WaitStatus.DONE
