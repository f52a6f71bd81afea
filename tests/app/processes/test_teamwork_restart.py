"""A delegate's approval survives the process that asked it (real daphne, SIGKILL).

The front desk asks billing for a refund; billing's refund waits for the person's approval.
The server is killed while it waits; the server started again on the same database shows
the approval (billing's, under the front desk's call); approving it continues the chat's
run, which resumes billing where it stopped: the refund runs exactly once, billing reports
it and the front desk answers with billing's report.
"""

from __future__ import annotations

import uuid

import pytest

from tests.app.processes.test_durable_waits import saved_notes
from tests.app.servers import DaphneProcess, fresh_database, server_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TEAM = "tests.app.team_assistants.FrontDesk,tests.app.team_assistants.Billing"


def approval_asked(frame: dict) -> bool:
    event = frame.get("event") or {}
    return event.get("type") == "custom" and event.get("name") == "approval_requested"


def ended(frame: dict) -> bool:
    event = frame.get("event") or {}
    return event.get("type") == "run_completed" or frame["type"] in ("run_failed", "error")


async def test_a_delegates_approval_survives_a_kill_and_the_run_completes(tmp_path):
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(url, ZETT_ASSISTANTS=TEAM, ZETT_DEFAULT_ASSISTANT="front")
        server = DaphneProcess("team", env).start()
        try:
            session_id = str(uuid.uuid4())
            client = await server.socket(session_id)
            await client.send({"type": "user_message", "content": "Refund 7"})
            asked = (await client.until(approval_asked))[-1]["event"]
            assert (asked["agent"], asked["parent_tool_call_id"]) == ("billing", "ask-1")
            server.kill()
            assert saved_notes(url) == 0
            server.start()
            again = await server.socket(session_id)
            assert [run["status"] for run in again.session_frame["runs"]] == ["paused"]
            (pending,) = again.session_frame["pending"]
            assert (pending["tool_call_id"], pending["agent"]) == ("refund-1", "billing")
            approval = pending["payload"]
            await again.send(
                {
                    "type": "external_event",
                    "name": "approval_response",
                    "payload": {
                        "tool_call_id": "refund-1",
                        "approved": True,
                        "digest": approval["digest"],
                    },
                }
            )
            result = await again.until(lambda f: f["type"] == "external_event_result")
            assert result[-1]["accepted_by"] == ["ConfirmationExtension"]
            frames = await again.until(ended)
            assert frames[-1]["event"]["message"]["content"] == ("Front: Billing: order 7 refunded")
            assert saved_notes(url) == 1
            nested = [
                f["event"] for f in frames if f["type"] == "agent_event" and "agent" in f["event"]
            ]
            assert "tool_completed" in {event["type"] for event in nested}
            final = await server.socket(session_id)
            assert [run["status"] for run in final.session_frame["runs"]] == [
                "resumed",
                "completed",
            ]
            assert [m["role"] for m in final.session_frame["history"]] == [
                "user",
                "assistant",
                "tool",
                "assistant",
            ]
        finally:
            await server.close_clients()
            server.stop()
