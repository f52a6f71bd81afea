"""An approval interrupt survives a SIGKILL of the server, over AG-UI (real daphne).

The stream of the run ends in an interrupt; the server is killed while it waits; a server
started again on the same database lists the wait as pending; the AG-UI answer (a
``resume``) becomes the reply that starts the continuation run. Fed every frame a client
saw across the restart, the encoder gives one valid AG-UI stream: the interrupted run, then
the continuation, which names it as its parent.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from agent_app.agui.encoder import RunEncoder
from agent_app.agui.interrupts import interrupt_for, replies_for
from agent_app.agui.run_input import parse_run_input
from tests.app.servers import DaphneProcess, fresh_database, server_env
from tests.app.test_agui_encoder import event_names, parse, validate

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def server(tmp_path) -> Iterator[DaphneProcess]:
    with fresh_database("sqlite", tmp_path) as url:
        process = DaphneProcess("agui-restart", server_env(url, ZETT_MODEL="demo"))
        process.start()
        try:
            yield process
        finally:
            process.stop()


def _asks_approval(frame: dict) -> bool:
    event = frame.get("event") or {}
    return event.get("type") == "custom" and event.get("name") == "approval_requested"


def _ended(frame: dict) -> bool:
    event = frame.get("event") or {}
    return event.get("type") == "run_completed" or frame["type"] in ("run_failed", "error")


async def test_an_approval_interrupt_is_answered_after_the_server_was_killed(server):
    thread_id = str(uuid.uuid4())
    before = await server.socket(thread_id)
    await before.send({"type": "user_message", "content": "save a note: buy milk"})
    asked = await before.until(_asks_approval)
    first = [frame for frame in asked if "seq" in frame]
    events = RunEncoder(thread_id).encode_all(first)
    finished = events[-1].data
    assert finished["type"] == "RUN_FINISHED"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "confirmation"

    server.kill()
    server.start()
    after = await server.socket(thread_id)
    (pending,) = after.session_frame["pending"]
    # The wait the restarted server lists is the interrupt the client was shown.
    assert interrupt_for(pending["name"], pending["payload"], pending["expires_at"]) == interrupt

    body = {
        "threadId": thread_id,
        "runId": "client-run-2",
        "messages": [],
        "resume": [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        ],
    }
    kinds = {item["tool_call_id"]: item["kind"] for item in after.session_frame["pending"]}
    (reply,) = replies_for(parse_run_input(json.dumps(body)).resume, kinds)
    await after.send({"type": "external_event", "name": reply.name, "payload": reply.payload})
    verdict = await after.until(lambda frame: frame["type"] == "external_event_result")
    assert verdict[-1]["accepted_by"] == ["ConfirmationExtension"]
    rest = [frame for frame in await after.until(_ended) if "seq" in frame]
    assert rest[-1]["event"]["type"] == "run_completed"

    encoder = RunEncoder(thread_id)
    stream = encoder.encode_all(first + rest)
    assert stream[: len(events)] == events  # the same events before the crash
    continuation = stream[len(events) :]
    started = next(event for event in continuation if event.type == "RUN_STARTED")
    assert started.data["parentRunId"] == first[0]["request_id"]
    assert started.data["runId"] != first[0]["request_id"]
    result = next(event for event in continuation if event.type == "TOOL_CALL_RESULT")
    assert result.data["toolCallId"] == interrupt["toolCallId"]
    assert result.data["metadata"]["zett"]["reply"] == {"kind": "approval", "approved": True}
    assert event_names(continuation)[-1] == "RUN_FINISHED"
    assert continuation[-1].data["outcome"] == {"type": "success"}
    ids = [event.id for event in stream if event.id is not None]
    assert ids == sorted(set(ids))  # across the restart, too
    for event in stream:
        parse(event)
    await validate(stream)
    await server.close_clients()
