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

from tests.app.servers import DaphneProcess, fresh_database, server_env
from tests.runtime.mcp_support import SERVER, calls_in

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def is_custom(name: str):
    return lambda f: (f.get("event") or {}).get("type") == "custom" and f["event"]["name"] == name


def ended(frame: dict) -> bool:
    event = frame.get("event") or {}
    return event.get("type") == "run_completed" or frame["type"] in ("run_failed", "error")


async def test_a_question_of_an_mcp_server_is_answerable_after_a_sigkill(tmp_path):
    log = tmp_path / "stdio.log"
    servers = {
        "mcpServers": {
            "local": {"command": sys.executable, "args": [str(SERVER), "stdio", str(log)]}
        }
    }
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(
            url,
            ZETT_MODEL="tests.app.durable_model:mcp_cleaner",
            ZETT_MCP_SERVERS=json.dumps(servers),
            ZETT_MCP_ALLOWED_COMMANDS=sys.executable,
        )
        server = DaphneProcess("mcp-elicitation", env).start()
        try:
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
            await client.send(
                {"type": "external_event", "name": "approval_response", "payload": reply}
            )
            frames = await client.until(is_custom("mcp_elicitation"))
            asked = frames[-1]["event"]["payload"]
            assert asked["message"] == "Why delete everything?"
            server.kill()
            server.start()

            again = await server.socket(session_id)
            (pending,) = again.session_frame["pending"]
            assert pending["kind"] == "elicitation"
            assert pending["tool_call_id"] == asked["tool_call_id"]
            assert pending["payload"]["requested_schema"] == asked["requested_schema"]
            answer = {
                "tool_call_id": asked["tool_call_id"],
                "action": "accept",
                "content": {"reason": "spring cleaning"},
            }
            await again.send(
                {"type": "external_event", "name": "mcp_elicitation_response", "payload": answer}
            )
            result = await again.until(lambda f: f["type"] == "external_event_result")
            assert result[-1]["accepted_by"] == ["MCPElicitationExtension"]
            frames = await again.until(ended)
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
        finally:
            await server.close_clients()
            server.stop()
