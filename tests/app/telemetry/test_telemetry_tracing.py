"""The app's spans (``agent_app.telemetry``), read from the SDK's in-memory exporter.

Real sockets through the ASGI app, a scripted model: the run's spans and their
attributes, the wait span of an approval and of a question, the socket's span as the
run's parent, the traceparent stored with the run, a continuation linked to the run it
continues; with ``ZETT_OTEL`` off nothing is recorded and nothing of opentelemetry is
imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from channels.testing import WebsocketCommunicator
from django.test import override_settings
from opentelemetry import trace

from agent_app.models import ChatRun
from tests.app.conftest import (
    RECEIVE_TIMEOUT,
    Socket,
    events_of,
    new_browser_cookie,
    stop_live_runs,
)
from tests.app.durable.test_waits import BROWSER, QUESTION, leave_a_paused_run
from tests.app.llm_doubles import call_tool, say
from tests.app.telemetry_support import global_exporter, ids_of, span_ids
from zett_agent.model import ModelUsage
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def spans():
    with override_settings(ZETT_OTEL=True):
        yield global_exporter()


def by_name(spans, name):
    (span,) = [span for span in spans.get_finished_spans() if span.name == name]
    return span


async def approve_a_note(socket, approved: bool = True) -> list[dict]:
    await socket.send({"type": "user_message", "content": "Note: buy milk"})
    await socket.until_event("custom", "approval_requested")
    payload = {"tool_call_id": "note-1", "approved": approved}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": payload})
    await socket.expect("external_event_result")
    return await socket.run_to_completion()


async def test_a_run_with_an_approved_tool_has_its_spans_and_the_approval_a_wait_span(
    spans, sockets, use_model
):
    use_model(
        ScriptedModel(
            [call_tool("save_note", "note-1", title="Milk", text="Buy milk"), say("Saved.")],
            usage=ModelUsage(input_tokens=7, output_tokens=3),
        )
    )
    socket = await sockets()
    frames = await approve_a_note(socket)
    assert any(e["type"] == "tool_completed" for e in events_of(frames))
    (wait,) = await spans.wait_for("wait approval")
    (run,) = await spans.wait_for("invoke_agent demo")
    chats = await spans.wait_for("chat", 2)
    tool = by_name(spans, "execute_tool save_note")

    (attempt,) = await spans.wait_for("attempt 1")
    run_id = run.get_span_context().span_id
    assert run.parent is None  # no request span around the socket here
    assert {chat.parent.span_id for chat in chats} == {run_id}
    assert tool.parent.span_id == run_id
    # The attempt's span, exported as the run began, is what waits and links name.
    assert attempt.parent.span_id == run_id
    assert attempt.end_time < min(chat.end_time for chat in chats)  # ended as it began
    assert attempt.attributes["zett.run.attempt"] == 1
    assert wait.parent.span_id == attempt.get_span_context().span_id
    assert wait.context.trace_id == run.context.trace_id
    assert run.attributes["gen_ai.conversation.id"] == socket.session_id
    assert run.attributes["gen_ai.agent.name"] == "demo"
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.usage.input_tokens"] == 14  # two model calls
    assert run.attributes["gen_ai.usage.output_tokens"] == 6
    assert run.attributes["zett.outcome"] == "completed"
    assert tool.attributes["gen_ai.tool.name"] == "save_note"
    assert tool.attributes["zett.outcome"] == "completed"
    assert wait.attributes["zett.wait.kind"] == "approval"
    assert wait.attributes["zett.wait.outcome"] == "approved"
    assert wait.attributes["zett.wait.answered_by"] == "anonymous"
    assert wait.attributes["gen_ai.tool.call.id"] == "note-1"
    assert wait.attributes["gen_ai.conversation.id"] == socket.session_id
    assert wait.end_time >= wait.start_time
    assert "gen_ai.input.messages" not in run.attributes  # no content without the setting
    assert "gen_ai.tool.call.arguments" not in tool.attributes
    stored = await ChatRun.objects.aget(session_id=socket.session_id)
    assert ids_of(stored.trace_context) == span_ids(attempt)


async def test_a_denied_approval_and_an_answered_question_say_how_they_ended(
    spans, sockets, use_model
):
    use_model(
        ScriptedModel(
            [
                call_tool("save_note", "note-1", title="Milk", text="Buy milk"),
                call_tool("ask_user", "ask-1", question="Which city?", options=["Paris", "Rome"]),
                say("Fine."),
            ]
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Note: buy milk"})
    await socket.until_event("custom", "approval_requested")
    denial = {"tool_call_id": "note-1", "approved": False}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": denial})
    await socket.until_event("custom", "ask_user")
    answer = {"tool_call_id": "ask-1", "answer": "Rome"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": answer})
    await socket.run_to_completion()
    (approval,) = await spans.wait_for("wait approval")
    (question,) = await spans.wait_for("wait ask_user")
    assert approval.attributes["zett.wait.outcome"] == "denied"
    assert question.attributes["zett.wait.outcome"] == "answered"
    assert question.attributes["zett.wait.kind"] == "ask_user"
    (tool,) = await spans.wait_for("execute_tool save_note")
    assert tool.attributes["zett.outcome"] == "denied"  # a declined call is no error
    assert tool.status.is_ok


async def test_stopping_a_run_while_it_waits_ends_its_wait_span_cancelled(
    spans, sockets, use_model
):
    use_model(ScriptedModel([call_tool("save_note", "note-1", title="Milk", text="Buy milk")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Note: buy milk"})
    await socket.until_event("custom", "approval_requested")
    await socket.send({"type": "cancel"})
    await socket.until(lambda frame: frame["type"] == "run_cancelled")
    (wait,) = await spans.wait_for("wait approval")
    assert wait.attributes["zett.wait.outcome"] == "cancelled"
    (run,) = await spans.wait_for("invoke_agent demo")
    assert run.attributes["zett.outcome"] == "cancelled"
    assert run.status.is_unset


async def test_the_socket_request_span_is_the_parent_of_the_run_it_starts(spans, use_model):
    """As with an ASGI instrumentation middleware: the socket's span is current in the
    consumer, and the run it starts is that span's child."""
    from zett_site.asgi import application

    requests = []

    async def instrumented(scope, receive, send):
        with trace.get_tracer("tests").start_as_current_span("websocket") as span:
            requests.append(span)
            await application(scope, receive, send)

    use_model(ScriptedModel([say("Hello.")]))
    cookie = await new_browser_cookie()
    communicator = WebsocketCommunicator(
        instrumented,
        f"/ws/sessions/{uuid.uuid4()}/",
        headers=[(b"origin", b"http://testserver"), (b"cookie", cookie.encode())],
    )
    socket = Socket(communicator, "")
    try:
        assert (await communicator.connect(timeout=RECEIVE_TIMEOUT))[0]
        await socket.expect("session")
        await socket.send({"type": "user_message", "content": "hi"})
        await socket.run_to_completion()
    finally:
        await communicator.disconnect()
        await stop_live_runs()
    (run,) = await spans.wait_for("invoke_agent demo")
    (request,) = requests
    assert run.parent is not None
    assert run.parent.span_id == request.get_span_context().span_id


async def test_content_is_recorded_only_with_zett_otel_content(spans, sockets, use_model):
    use_model(ScriptedModel([say("Hello.")]))
    with override_settings(ZETT_OTEL_CONTENT=True):
        socket = await sockets()
        await socket.send({"type": "user_message", "content": "hi there"})
        await socket.run_to_completion()
    (run,) = await spans.wait_for("invoke_agent demo")
    assert "hi there" in run.attributes["gen_ai.input.messages"]


async def test_a_continuation_run_links_to_the_run_it_continues(spans, sockets, use_model):
    """The rows a dead worker leaves (a run that asked, its traceparent stored): the reply
    continues it, and the continuation's span links to that traceparent; the question's
    wait span is the dead run's child."""
    use_model(ScriptedModel([say("Rome it is.")]))
    session_id, request_id = await leave_a_paused_run([QUESTION], {"ask-1": "ask_user"})
    dead_run = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    await ChatRun.objects.filter(request_id=request_id).aupdate(trace_context=dead_run)
    socket = await sockets(session_id, cookie=BROWSER["cookie"])
    assert [item["tool_call_id"] for item in socket.session_frame["pending"]] == ["ask-1"]
    answer = {"tool_call_id": "ask-1", "answer": "Rome"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": answer})
    started = (await socket.until(lambda frame: frame["type"] == "run_started"))[-1]
    assert started["kind"] == "resume"
    await socket.run_to_completion()
    (run,) = await spans.wait_for("invoke_agent demo")
    (link,) = run.links
    assert (link.context.trace_id, link.context.span_id) == (int("ab" * 16, 16), int("cd" * 8, 16))
    assert run.attributes["zett.run.resumed"] is True
    assert run.context.trace_id != link.context.trace_id  # a trace of its own, linked
    (wait,) = await spans.wait_for("wait ask_user")
    assert wait.parent.span_id == int("cd" * 8, 16)
    assert wait.attributes["zett.wait.outcome"] == "answered"
    continuation = await ChatRun.objects.aget(request_id=started["request_id"])
    (attempt,) = await spans.wait_for("attempt 1")
    assert attempt.parent.span_id == run.get_span_context().span_id
    assert ids_of(continuation.trace_context) == span_ids(attempt)


async def test_with_tracing_off_nothing_is_recorded(sockets, use_model):
    spans = global_exporter()
    use_model(ScriptedModel([say("Hello.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()
    assert spans.get_finished_spans() == ()
    run = await ChatRun.objects.aget(session_id=socket.session_id)
    assert run.trace_context == ""


_OFF_SCRIPT = """
import asyncio, json, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.backends.db import SessionStore
from agent_app.guard.access import BROWSER_KEY_FIELD
from zett_site.asgi import application

async def main():
    session = SessionStore()
    session[BROWSER_KEY_FIELD] = "browser-1"
    await asyncio.to_thread(session.create)
    socket = WebsocketCommunicator(
        application,
        "/ws/sessions/5b7e7c1e-0000-4000-8000-000000000001/",
        headers=[(b"origin", b"http://testserver"),
                 (b"cookie", f"sessionid={session.session_key}".encode())],
    )
    assert (await socket.connect())[0]
    await socket.receive_json_from(10)
    await socket.send_json_to({"type": "user_message", "content": "what is 1/3 + 1/6?"})
    while True:
        frame = await socket.receive_json_from(10)
        ended = (frame.get("event") or {}).get("type") or frame["type"]
        if ended in ("run_completed", "run_failed", "error"):
            break
    await socket.disconnect()
    print(json.dumps({"ended": ended,
                      "otel": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))

asyncio.run(main())
"""


def test_with_zett_otel_unset_a_run_imports_nothing_of_opentelemetry(tmp_path):
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ZETT_", "OTEL_", "DATABASE_URL", "REDIS_URL"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="zett_site.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        ZETT_DEMO_PACE="0",
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", _OFF_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"ended": "run_completed", "otel": []}


def test_manage_py_check_wants_booleans_and_the_api_for_zett_otel(monkeypatch):
    import importlib.util

    from agent_app.checks import check_setting_types, check_tracing

    with override_settings(ZETT_OTEL="1", ZETT_OTEL_CONTENT=1, ZETT_METRICS_TOKEN=None):
        messages = [error.msg for error in check_setting_types()]
    assert "ZETT_OTEL must be bool, got '1'." in messages
    assert "ZETT_OTEL_CONTENT must be bool, got 1." in messages
    assert "ZETT_METRICS_TOKEN must be str, got None." in messages
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "opentelemetry" else real(name)
    )
    with override_settings(ZETT_OTEL=True):
        assert [error.id for error in check_tracing()] == ["zett.E040"]
    with override_settings(ZETT_OTEL=False):
        assert check_tracing() == []
