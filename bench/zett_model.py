"""Zero-latency models for zett: the benchmark workloads, and a model for the socket bench.

``WorkloadModel`` follows the shared rule of ``bench.workloads`` (call ``add`` until the
conversation holds enough tool results, then stream the 20-delta answer). Its delta events
are frozen dataclasses built once, so the model itself costs next to nothing per request.

``socket_model()`` is the factory the socket benchmark hands to the app through
``ZETT_MODEL="bench.zett_model:socket_model"``. What it streams depends on the user's
message so one server process serves every socket scenario:

- ``"stream <n>"``: answer with ``n`` text deltas and no tool (events per second);
- ``"ask"``: call the app's ``ask_user`` tool once, then answer with one delta (external
  reply round trip, paused sessions);
- anything else: the W1 workload shape without a tool, a 20-delta answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from bench.workloads import (
    ANSWER_DELTAS,
    ANSWER_TEXT,
    TOOL_NAME,
    Workload,
    add_arguments,
    add_arguments_json,
    tool_call_id,
)
from zett_agent.messages import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    content_text,
)
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse, ToolCallDelta

__all__ = ["SocketModel", "WorkloadModel", "socket_model"]

_ANSWER_EVENTS = tuple(ModelEvent.text(delta) for delta in ANSWER_DELTAS)


def _tool_results(request: ModelRequest) -> int:
    return sum(1 for message in request.messages if isinstance(message, ToolMessage))


class WorkloadModel:
    """The zett double of a workload: stateless, one instance serves every request."""

    def __init__(self, workload: Workload) -> None:
        self._wanted = workload.tool_calls

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        done = _tool_results(request)
        if done < self._wanted:
            call_id = tool_call_id(done)
            yield ModelEvent.tool_call(
                ToolCallDelta(0, call_id, TOOL_NAME, add_arguments_json(done))
            )
            call = ToolCall(call_id, TOOL_NAME, add_arguments(done))
            message = AssistantMessage(tool_calls=(call,))
            yield ModelEvent.completed(ModelResponse(message, finish_reason="tool_calls"))
            return
        for event in _ANSWER_EVENTS:
            yield event
        yield ModelEvent.completed(
            ModelResponse(AssistantMessage(content=ANSWER_TEXT), finish_reason="stop")
        )


class SocketModel:
    """The socket benchmark's model; see the module docstring for its commands."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        # Only the latest user turn counts: the session's history holds earlier ones.
        command: list[str] = []
        answered = False
        for message in reversed(request.messages):
            if isinstance(message, ToolMessage):
                answered = True
            elif isinstance(message, UserMessage):
                command = content_text(message.content).split()
                break
        if command[:1] == ["ask"] and not answered:
            call = ToolCall("ask_1", "ask_user", {"question": "Proceed?"})
            yield ModelEvent.completed(
                ModelResponse(AssistantMessage(tool_calls=(call,)), finish_reason="tool_calls")
            )
            return
        if command[:1] == ["stream"] and len(command) == 2 and command[1].isdigit():
            count = int(command[1])
            for _ in range(count):
                yield ModelEvent.text("x")
            yield ModelEvent.completed(
                ModelResponse(AssistantMessage(content="x" * count), finish_reason="stop")
            )
            return
        for event in _ANSWER_EVENTS:
            yield event
        yield ModelEvent.completed(
            ModelResponse(AssistantMessage(content=ANSWER_TEXT), finish_reason="stop")
        )


def socket_model() -> SocketModel:
    """Factory named by ``ZETT_MODEL`` for the socket benchmark."""
    return SocketModel()
