"""Host-page tools (``Assistant.browser_tools``): the run waits for a page to run the
tool, durably and with a deadline, and the page's result (or a clear failure) is what the
model reads next."""

from __future__ import annotations

import uuid
from contextlib import aclosing

import pytest
from asgiref.sync import sync_to_async

from agent_app.agents.browser_tools import (
    BROWSER_TOOL_EVENT,
    BROWSER_TOOL_RESULT,
    BrowserToolExtension,
)
from agent_app.assistants import register, registry
from agent_app.durable.store import RowMeta, append_rows
from agent_app.models import ChatRun, ChatSession, ReplyWait, WaitKind, WaitStatus
from tests.app.conftest import events_of, new_browser
from tests.app.llm_doubles import call_tool, say
from tests.app.widget_host.assistants import Shopper, highlight_product
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage, content_text
from zett_agent.testing import ScriptedModel

CONFIG = AgentRunConfig(session_id="session-1", request_id="request-1")


def tool_result_seen(model: ScriptedModel) -> ToolMessage:
    """The tool message the model was given in its last request."""
    return next(m for m in reversed(model.requests[-1].messages) if isinstance(m, ToolMessage))


async def run_answering(extension: BrowserToolExtension, model: ScriptedModel, reply):
    agent = await Agent.create(model, extensions=[extension])
    events = []
    async with aclosing(agent.stream("where are the red shoes?", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is AgentEventType.CUSTOM and event.name == BROWSER_TOOL_EVENT:
                payload = reply(event.payload)
                if payload is not None:
                    taken = agent.emit_external_event(
                        ExternalEvent(BROWSER_TOOL_RESULT, payload), config=CONFIG
                    )
                    assert taken == ["BrowserToolExtension"]
    return events


async def test_the_pages_result_is_what_the_model_reads_next():
    model = ScriptedModel(
        [call_tool("highlight_product", "call-1", product_id="p-7"), say("It is highlighted.")]
    )
    asked = []

    def page(payload):
        asked.append(payload)
        return {"tool_call_id": payload["tool_call_id"], "result": {"highlighted": "p-7"}}

    events = await run_answering(BrowserToolExtension([highlight_product]), model, page)
    assert asked[0]["tool"] == "highlight_product"
    assert asked[0]["arguments"] == {"product_id": "p-7"}
    assert asked[0]["response_event"] == BROWSER_TOOL_RESULT
    seen = tool_result_seen(model)
    assert seen.success and content_text(seen.content) == '{"highlighted": "p-7"}'
    assert events[-1].type is AgentEventType.RUN_COMPLETED


async def test_an_error_from_the_page_fails_the_call_with_the_pages_words():
    model = ScriptedModel(
        [call_tool("highlight_product", "call-1", product_id="p-9"), say("Sorry.")]
    )
    extension = BrowserToolExtension([highlight_product])
    await run_answering(
        extension, model, lambda p: {"tool_call_id": p["tool_call_id"], "error": "no such product"}
    )
    seen = tool_result_seen(model)
    assert not seen.success
    assert "could not run highlight_product: no such product" in content_text(seen.content)


async def test_with_no_page_the_call_ends_at_its_deadline_with_a_clear_result():
    model = ScriptedModel(
        [call_tool("highlight_product", "call-1", product_id="p-7"), say("Going on.")]
    )
    extension = BrowserToolExtension([highlight_product], timeout=0.05)
    events = await run_answering(extension, model, lambda payload: None)
    asked = next(e for e in events if e.type is AgentEventType.CUSTOM)
    assert asked.payload["expires_at"]
    seen = tool_result_seen(model)
    assert not seen.success
    assert "No page ran highlight_product within 0.05 seconds" in content_text(seen.content)
    assert seen.attributes["browser_tool"] == {"expired": True}


async def test_invalid_arguments_fail_at_once_and_never_wait():
    model = ScriptedModel([call_tool("highlight_product", "call-1", colour="red"), say("Hm.")])
    events = await run_answering(BrowserToolExtension([highlight_product]), model, lambda p: None)
    assert not any(e.type is AgentEventType.CUSTOM for e in events)
    seen = tool_result_seen(model)
    assert not seen.success and "product_id" in content_text(seen.content)


def test_only_tools_are_accepted():
    with pytest.raises(TypeError, match="browser_tools must hold @tool functions"):
        BrowserToolExtension([lambda product_id: product_id])


@pytest.fixture
def shopper():
    register(Shopper)
    yield
    registry.unregister("shopper")


@pytest.mark.django_db(transaction=True)
async def test_over_the_socket_the_call_is_a_stored_wait_the_page_answers(
    sockets, use_model, shopper
):
    model = ScriptedModel(
        [call_tool("highlight_product", "call-1", product_id="p-7"), say("Done.")]
    )
    use_model(model)
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "show me", "assistant": "shopper"})
    frames = await socket.until_event("custom", BROWSER_TOOL_EVENT)
    payload = frames[-1]["event"]["payload"]
    wait = await ReplyWait.objects.aget(tool_call_id="call-1")
    assert (wait.kind, wait.status, wait.tool_name) == (
        WaitKind.BROWSER_TOOL,
        WaitStatus.OPEN,
        "highlight_product",
    )
    reply = {"tool_call_id": payload["tool_call_id"], "result": "highlighted p-7"}
    await socket.send({"type": "external_event", "name": BROWSER_TOOL_RESULT, "payload": reply})
    frames = await socket.run_to_completion()
    result = next(f for f in frames if f["type"] == "external_event_result")
    assert result["accepted_by"] == ["BrowserToolExtension"]
    completed = next(e for e in events_of(frames) if e["type"] == "tool_completed")
    assert completed["message"]["content"] == "highlighted p-7"
    assert content_text(tool_result_seen(model).content) == "highlighted p-7"
    assert (await ReplyWait.objects.aget(tool_call_id="call-1")).status == WaitStatus.DONE


@pytest.mark.django_db(transaction=True)
async def test_over_the_socket_an_unanswered_call_expires_and_the_run_goes_on(
    sockets, use_model, shopper, settings
):
    settings.ZETT_BROWSER_TOOL_TIMEOUT = 0.2
    model = ScriptedModel(
        [call_tool("highlight_product", "call-1", product_id="p-7"), say("Going on.")]
    )
    use_model(model)
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "show me", "assistant": "shopper"})
    frames = await socket.run_to_completion()
    failed = next(e for e in events_of(frames) if e["type"] == "tool_failed")
    assert "No page ran highlight_product within 0.2 seconds" in failed["message"]["content"]
    assert (await ReplyWait.objects.aget(tool_call_id="call-1")).status == WaitStatus.EXPIRED
    late = {"tool_call_id": "call-1", "result": "too late"}
    await socket.send({"type": "external_event", "name": BROWSER_TOOL_RESULT, "payload": late})
    assert (await socket.expect("external_event_result"))["reason"] == "expired"


@sync_to_async
def _leave_a_run_that_died_calling_the_page(browser_key: str) -> tuple[str, str]:
    """A run whose process died after the model called the page's tool, before it asked."""
    session = ChatSession.objects.create(
        title="Shoes", browser_key=browser_key, assistant="shopper"
    )
    request_id = str(uuid.uuid4())
    ChatRun.objects.create(request_id=request_id, session=session, worker="dead:1:boot")
    call = ToolCall("call-1", "highlight_product", {"product_id": "p-7"})
    append_rows(
        str(session.pk),
        request_id,
        [
            (UserMessage("Where are the shoes?"), RowMeta()),
            (AssistantMessage(tool_calls=(call,)), RowMeta()),
        ],
    )
    return str(session.pk), request_id


@pytest.mark.django_db(transaction=True)
async def test_a_call_left_by_a_dead_process_is_pending_for_a_page_and_its_answer_continues_the_run(
    sockets, use_model, shopper, settings
):
    settings.ZETT_BROWSER_TOOL_TIMEOUT = 600
    model = use_model(ScriptedModel([say("There they are.")]))
    cookie, key = await new_browser()
    session_id, request_id = await _leave_a_run_that_died_calling_the_page(key)
    socket = await sockets(session_id, cookie=cookie)
    (pending,) = socket.session_frame["pending"]
    assert (pending["kind"], pending["name"]) == ("browser_tool", BROWSER_TOOL_EVENT)
    assert pending["payload"]["tool"] == "highlight_product"
    assert pending["payload"]["arguments"] == {"product_id": "p-7"}
    assert pending["expires_at"]  # ZETT_BROWSER_TOOL_TIMEOUT from the recovery
    reply = {"tool_call_id": "call-1", "result": "highlighted Red shoes"}
    await socket.send({"type": "external_event", "name": BROWSER_TOOL_RESULT, "payload": reply})
    result = await socket.expect("external_event_result")
    assert result["accepted_by"] == ["BrowserToolExtension"]
    started = await socket.until(lambda frame: frame["type"] == "run_started")
    assert (started[-1]["kind"], started[-1]["resumed_from"]) == ("resume", request_id)
    frames = await socket.run_to_completion()
    assert events_of(frames)[-1]["message"]["content"] == "There they are."
    assert content_text(tool_result_seen(model).content) == "highlighted Red shoes"


@pytest.mark.django_db
def test_over_ag_ui_a_host_page_call_is_no_interrupt_to_resume():
    """Only a person's waits are AG-UI interrupts: a resume naming a host-page call is
    refused as an unknown interrupt rather than sent as an answer it cannot be."""
    from agent_app.agui.errors import AguiError
    from agent_app.agui.interrupts import replies_for
    from agent_app.agui.run_input import ResumeEntry
    from agent_app.api.agui import _interrupts_of

    session = ChatSession.objects.create(title="Shoes", assistant="shopper")
    for call_id, kind, event in (
        ("call-1", WaitKind.ASK_USER, "ask_user"),
        ("call-2", WaitKind.BROWSER_TOOL, BROWSER_TOOL_EVENT),
    ):
        ReplyWait.objects.create(
            session=session,
            request_id="request-1",
            tool_call_id=call_id,
            tool_name=event,
            kind=kind,
            event_name=event,
            response_event=f"{event}_response",
        )
    kinds, _ = _interrupts_of(str(session.pk))
    assert kinds == {"call-1": WaitKind.ASK_USER}
    with pytest.raises(AguiError, match="no interrupt 'call-2'"):
        entry = ResumeEntry(interrupt_id="call-2", status="resolved", payload={"answer": "x"})
        replies_for([entry], kinds)
