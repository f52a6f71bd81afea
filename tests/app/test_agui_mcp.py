"""An MCP server's question over AG-UI, through the real endpoint and a real stdio server:
answered, declined (``{"action": "decline"}``), cancelled (``status: "cancelled"``), and an
answer the question's schema refuses (400 ``invalid_resume`` naming the field, nothing
delivered, the question still open).
"""

from __future__ import annotations

import uuid

import jsonschema
import pytest

from agent_app.assistants import register, registry
from tests.app.agui_support import (
    check_events,
    http_fixture,  # noqa: F401 (the ``http`` fixture)
    make_token,
    post_run,
    resume_input,
    run_input,
)
from tests.app.asgi_http import SseReader
from tests.app.llm_doubles import call_tool, say
from tests.app.test_mcp_chat import McpHelper
from tests.runtime.mcp_support import calls_in, stdio_command
from zett_agent.mcp import MCPServer
from zett_agent.testing import ScriptedModel

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
async def local(tmp_path):
    log = tmp_path / "stdio.log"
    server = MCPServer("local", command=stdio_command(log))
    McpHelper.mcp_servers = [server]
    register(McpHelper)
    yield log
    await server.aclose()
    registry.unregister(McpHelper.id)


async def ask(http, use_model) -> tuple[str, str, dict]:
    """A run whose tool's server asks a question: (token, thread id, the interrupt)."""
    use_model(ScriptedModel([call_tool("local__delete_all"), say("Done.")]))
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    call = await post_run(http, secret, run_input(thread_id, "Delete all"), McpHelper.id)
    events = await SseReader(call).rest()
    assert events[-1].data["outcome"]["type"] == "interrupt"
    (interrupt,) = events[-1].data["outcome"]["interrupts"]
    assert interrupt["reason"] == "input_required"
    return secret, thread_id, interrupt


async def resumed(http, secret, thread_id, interrupt, payload, status="resolved") -> list:
    body = resume_input(thread_id, interrupt["id"], payload, status)
    call = await post_run(http, secret, body, McpHelper.id)
    assert call.status == 200, await call.json()
    events = await SseReader(call).rest()
    check_events(events)
    return events


def result_of(events) -> str:
    return next(e for e in events if e.type == "TOOL_CALL_RESULT").data["content"]


@pytest.mark.parametrize(
    ("payload", "status", "told"),
    [
        ({"answer": "tidy"}, "resolved", "deleted because tidy"),
        ({"action": "decline"}, "resolved", "kept (decline)"),
        ({"action": "cancel"}, "resolved", "kept (cancel)"),
        (None, "cancelled", "kept (cancel)"),
    ],
)
async def test_a_question_is_answered_declined_or_cancelled_and_the_server_is_told(
    http, use_model, local, payload, status, told
):
    secret, thread_id, interrupt = await ask(http, use_model)
    if payload is not None:
        jsonschema.validate(payload, interrupt["responseSchema"])  # what the client checks
    events = await resumed(http, secret, thread_id, interrupt, payload, status)
    assert result_of(events) == told
    assert events[-1].data["outcome"] == {"type": "success"}
    # (On the 2026-07-28 protocol the call is sent again with the answer.)
    assert {entry["tool"] for entry in calls_in(local)} == {"delete_all"}


async def test_an_answer_the_question_refuses_is_400_naming_the_field(http, use_model, local):
    secret, thread_id, interrupt = await ask(http, use_model)
    schema = {"answer": {"reason": 5}}
    body = resume_input(thread_id, interrupt["id"], schema)
    refused = await post_run(http, secret, body, McpHelper.id)
    assert refused.status == 400
    error = await refused.json()
    assert error["code"] == "invalid_resume"
    assert "'reason'" in error["message"] and "5 is not of type 'string'" in error["message"]
    wrong = await post_run(
        http, secret, resume_input(thread_id, interrupt["id"], {"action": "maybe"}), McpHelper.id
    )
    assert wrong.status == 400 and "action must be one of" in (await wrong.json())["message"]
    # Nothing was delivered: the question still takes an answer.
    events = await resumed(http, secret, thread_id, interrupt, {"answer": "tidy"})
    assert result_of(events) == "deleted because tidy"
