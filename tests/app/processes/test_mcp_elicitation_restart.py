"""An MCP server's question survives the worker that asked it (real daphne, SIGKILL).

The site's stdio MCP server (``ZETT_MCP_SERVERS``) has ``delete_all``, which needs
approval (no annotations) and then asks the person why. The worker is killed while the
question waits. After the restart the question is still on the page; answering it
continues the run, and the call ends with an honest error carrying the answer: the
server's call died with the old connection and is never sent again (its log shows one
call), and the approval is not asked again.
"""

from __future__ import annotations

import json
import sys
import uuid

import pytest

from tests.app.processes.runs import completed_or_failed, is_custom
from tests.app.servers import one_worker
from tests.runtime.mcp_support import SERVER, calls_in

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


async def test_a_question_of_an_mcp_server_is_answerable_after_a_sigkill(tmp_path):
    log = tmp_path / "stdio.log"
    servers = {
        "mcpServers": {
            "local": {"command": sys.executable, "args": [str(SERVER), "stdio", str(log)]}
        }
    }
    worker = one_worker(
        "mcp-elicitation",
        tmp_path,
        ZETT_MODEL="tests.app.durable_model:mcp_cleaner",
        ZETT_MCP_SERVERS=json.dumps(servers),
        ZETT_MCP_ALLOWED_COMMANDS=sys.executable,
    )
    async with worker as (server, _):
        session_id = str(uuid.uuid4())
        client = await server.socket(session_id)
        await client.send({"type": "user_message", "content": "Clean up"})
        frames = await client.until(is_custom("approval_requested"))
        approval = frames[-1]["event"]["payload"]
        assert approval["tool"] == "local__delete_all"
        reply = {
            "tool_call_id": approval["tool_call_id"],
            "approved": True,
            "digest": approval["digest"],
        }
        await client.send({"type": "external_event", "name": "approval_response", "payload": reply})
        frames = await client.until(is_custom("ask_user"))
        asked = frames[-1]["event"]["payload"]
        assert (asked["question"], asked["source"]) == ("Why delete everything?", "mcp")
        await server.crash_and_restart()

        again = await server.socket(session_id)
        (pending,) = again.session_frame["pending"]
        assert (pending["kind"], pending["name"]) == ("ask_user", "ask_user")
        assert pending["response_event"] == "ask_user_response"
        assert pending["tool_call_id"] == asked["tool_call_id"]
        assert pending["payload"]["requested_schema"] == asked["requested_schema"]
        answer = {"tool_call_id": asked["tool_call_id"], "answer": "spring cleaning"}
        await again.send({"type": "external_event", "name": "ask_user_response", "payload": answer})
        result = await again.until(lambda f: f["type"] == "external_event_result")
        assert result[-1]["accepted_by"] == ["MCPElicitationExtension"]
        frames = await again.until(completed_or_failed)
        assert not [f for f in frames if is_custom("approval_requested")(f)]
        text = frames[-1]["event"]["message"]["content"]
        assert text.startswith("Result: Interrupted")
        assert "You answered: accepted (reason: spring cleaning)" in text
        assert "not run again" in text
        assert [call["tool"] for call in calls_in(log)] == ["delete_all"]  # sent once

        final = await server.socket(session_id)
        assert [run["status"] for run in final.session_frame["runs"]] == [
            "resumed",
            "completed",
        ]
        assert final.session_frame["pending"] == []
