"""The scripted LLM of the durable-wait tests' servers (``ZETT_MODEL`` seam).

Asked to plan a trip, it calls ``ask_user`` and ``save_note`` in one answer, so a run waits
for a question and then an approval; once both results are in, it answers with what the
user said. The answer depends only on the conversation, so any process — the one that
asked, or the one that continues after a crash — answers the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage
from zett_agent.model import ModelRequest
from zett_agent.testing import ScriptedModel


class TripPlanner:
    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator:
        self.requests.append(request)
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            results = {
                m.tool_call_id: m.content for m in request.messages if isinstance(m, ToolMessage)
            }
            answer = AssistantMessage(
                f"Going to {results.get('ask-city', '?')}; note: {results.get('note-trip', '?')}"
            )
        else:
            answer = AssistantMessage(
                tool_calls=(
                    ToolCall("ask-city", "ask_user", {"question": "Which city?"}),
                    ToolCall("note-trip", "save_note", {"title": "Trip", "text": "Pack bags"}),
                )
            )
        async for event in ScriptedModel([answer]).stream(request):
            yield event


def trip_planner() -> TripPlanner:
    return TripPlanner()


class McpCleaner:
    """Asked anything, it calls the MCP tool ``local__delete_all`` (whose server asks the
    person why), or, asked ``gate: <path>``, ``local__gate`` (progress, then a pause until
    the file exists); once the result is in, it answers with it."""

    async def stream(self, request: ModelRequest) -> AsyncIterator:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            answer = AssistantMessage(f"Result: {last.content}")
        elif str(last.content).startswith("gate:"):  # the gate tool: progress, then a pause
            path = str(last.content).removeprefix("gate:").strip()
            answer = AssistantMessage(
                tool_calls=(ToolCall("gate-1", "local__gate", {"path": path}),)
            )
        else:
            answer = AssistantMessage(tool_calls=(ToolCall("del-1", "local__delete_all", {}),))
        async for event in ScriptedModel([answer]).stream(request):
            yield event


def mcp_cleaner() -> McpCleaner:
    return McpCleaner()
