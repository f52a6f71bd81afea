"""The capabilities document of an assistant's AG-UI endpoint (``getCapabilities``).

What a client may rely on: streamed SSE that can be re-attached after a dropped connection
(``transport.resumable``), reasoning, server-side tools (the client's own ``tools`` are not
run), approvals and questions as interrupts. Shared state and client tools are not offered.
"""

from __future__ import annotations

from typing import Any

import zett_agent

__all__ = ["capabilities"]


def capabilities(
    *,
    assistant_id: str,
    name: str,
    description: str | None = None,
    events_path: str = "api/ag-ui/threads/<threadId>/events",
) -> dict[str, Any]:
    """The AG-UI ``AgentCapabilities`` (camelCase JSON) of one assistant; ``events_path`` is
    where a thread's stream is re-attached (the site's absolute path, script prefix and all)."""
    identity: dict[str, Any] = {
        "name": name,
        "type": "zett",
        "version": zett_agent.__version__,
        "provider": "zett",
    }
    if description:
        identity["description"] = description
    return {
        "identity": identity,
        "transport": {
            "streaming": True,
            "websocket": False,
            "httpBinary": False,
            "pushNotifications": False,
            "resumable": True,
        },
        "tools": {"supported": True, "clientProvided": False, "parallelCalls": False},
        "output": {"structuredOutput": False},
        "state": {"snapshots": False, "deltas": False, "memory": False, "persistentState": False},
        "reasoning": {"supported": True, "streaming": True, "encrypted": False},
        "humanInTheLoop": {
            "supported": True,
            "approvals": True,
            "interrupts": True,
            "interventions": False,
            "feedback": False,
            "approveWithEdits": False,
        },
        "custom": {
            "zett": {
                "assistant": assistant_id,
                "reattach": f"GET {events_path} with Last-Event-ID",
                "customEventPrefix": "zett.",
            }
        },
    }
