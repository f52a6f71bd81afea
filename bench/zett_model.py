"""Zero-latency models for zett: the benchmark workloads, and a model for the socket bench.

``WorkloadModel`` follows the shared rule of ``bench.workloads`` (call ``add`` until the
conversation holds enough tool results, then stream the 20-delta answer). Its delta events
are frozen dataclasses built once, so the model itself costs next to nothing per request.

``ProviderWorkloadModel`` (variant a) is zett's real ``OpenAIModel`` with only the HTTP
call replaced: each request is mapped to Chat Completions parameters as for a server, and
the answer arrives as the openai SDK's ``ChatCompletionChunk`` objects (built once, as the
SDK would have parsed them from the wire) that zett's chunk mapping turns into model
events, parsing the tool call's JSON arguments at the end.

``socket_model()`` is the factory the socket benchmark hands to the app through
``ZETT_MODEL="bench.zett_model:socket_model"``. What it streams depends on the user's
message so one server process serves every socket scenario:

- ``"stream <n>"``: answer with ``n`` text deltas and no tool (events per second);
- ``"ask"``: call the app's ``ask_user`` tool once, then answer with one delta (external
  reply round trip, paused sessions);
- ``"paced <n> <ms>"``: ``n`` text deltas with ``ms`` milliseconds before each (a run long
  enough to disconnect from in the middle; many sessions at a chosen load); with a third
  word ``tool``, first one call of the app's ``calculate`` tool (tool frames mid-run);
- anything else: the W1 workload shape without a tool, a 20-delta answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

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
from zett_agent.providers.openai import OpenAIModel, build_chat_params

__all__ = ["ProviderWorkloadModel", "SocketModel", "WorkloadModel", "socket_model"]

_ANSWER_EVENTS = tuple(ModelEvent.text(delta) for delta in ANSWER_DELTAS)
#: The socket model's one-character delta, built once: model events are immutable, so one
#: serves every delta of every run and the double costs the server nothing per delta (the
#: socket benchmark weighs the app's frame path, not the model's; see docs/benchmarks.md).
_X = ModelEvent.text("x")


def _tool_results(request: ModelRequest) -> int:
    """Tool results since the newest user message: the current request's, however long the
    session's history (scanning back stops there, so the double costs the same at any length)."""
    done = 0
    for message in reversed(request.messages):
        if isinstance(message, ToolMessage):
            done += 1
        elif isinstance(message, UserMessage):
            break
    return done


class WorkloadModel:
    """The zett double of a workload: stateless, one instance serves every request."""

    def __init__(self, workload: Workload) -> None:
        self._wanted = workload.tool_calls
        self._turn_per_event = workload.turn_per_event

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        events = self._events(request)
        return _one_turn_each(events) if self._turn_per_event else events

    async def _events(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
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


async def _one_turn_each(events: AsyncIterator[ModelEvent]) -> AsyncIterator[ModelEvent]:
    """Let the event loop go round once before every event (variant c)."""
    async for event in events:
        await asyncio.sleep(0)
        yield event


def _chunk(
    delta: dict[str, Any] | None, finish_reason: str | None = None, usage: Any = None
) -> Any:
    from openai.types.chat import ChatCompletionChunk

    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    )
    return ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "bench-model",
            "choices": choices,
            "usage": usage,
        }
    )


def _tool_call_chunks(done: int) -> list[Any]:
    """What a server streams for one ``add`` call: the call's head, its arguments, the end."""
    head = {"index": 0, "id": tool_call_id(done), "type": "function"}
    arguments = add_arguments_json(done)
    middle = len(arguments) // 2
    return [
        _chunk({"role": "assistant", "tool_calls": [head | {"function": {"name": TOOL_NAME}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:middle]}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[middle:]}}]}),
        _chunk({}, "tool_calls"),
        _usage_chunk(),
    ]


def _answer_chunks() -> list[Any]:
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": delta}) for delta in ANSWER_DELTAS]
    return [*chunks, _chunk({}, "stop"), _usage_chunk()]


def _usage_chunk() -> Any:
    return _chunk(None, usage={"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70})


class _ChunkStream:
    """Stands in for the SDK's ``AsyncStream``: the chunks of one response, then the end."""

    __slots__ = ("_chunks", "_turn_per_event")

    def __init__(self, chunks: list[Any], turn_per_event: bool) -> None:
        self._chunks = iter(chunks)
        self._turn_per_event = turn_per_event

    def __aiter__(self) -> _ChunkStream:
        return self

    async def __anext__(self) -> Any:
        if self._turn_per_event:
            await asyncio.sleep(0)
        try:
            return next(self._chunks)
        except StopIteration:
            raise StopAsyncIteration from None

    async def close(self) -> None:
        return None


class _NoHttpClient:
    """The client the provider builds, reduced to what it reads."""

    class base_url:  # mirrors ``AsyncOpenAI.base_url``
        host = "127.0.0.1"

    async def close(self) -> None:
        return None


class ProviderWorkloadModel(OpenAIModel):
    """zett's ``OpenAIModel`` on a workload's answers, with no HTTP (variant a)."""

    def __init__(self, workload: Workload) -> None:
        super().__init__("bench-model", api_key="unused", base_url="http://127.0.0.1:9/v1")
        self._wanted = workload.tool_calls
        self._turn_per_event = workload.turn_per_event
        self._tool_chunks = [_tool_call_chunks(done) for done in range(workload.tool_calls)]
        self._answer = _answer_chunks()

    def _build_client(self) -> Any:
        return _NoHttpClient()

    async def _open_stream(self, client: Any, request: ModelRequest) -> Any:
        build_chat_params(request, model=self.model, max_tokens=self.max_tokens, official=False)
        done = _tool_results(request)
        chunks = self._tool_chunks[done] if done < self._wanted else self._answer
        return _ChunkStream(chunks, self._turn_per_event)


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
        if command[:1] == ["paced"] and len(command) >= 3 and command[1].isdigit():
            if command[3:4] == ["tool"] and not answered:
                call = ToolCall("calc_1", "calculate", {"expression": "6*7"})
                yield ModelEvent.completed(
                    ModelResponse(AssistantMessage(tool_calls=(call,)), finish_reason="tool_calls")
                )
                return
            count, pause = int(command[1]), float(command[2]) / 1000
            for _ in range(count):
                await asyncio.sleep(pause)
                yield _X
            yield ModelEvent.completed(
                ModelResponse(AssistantMessage(content="x" * count), finish_reason="stop")
            )
            return
        if command[:1] == ["stream"] and len(command) == 2 and command[1].isdigit():
            count = int(command[1])
            for _ in range(count):
                yield _X
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
