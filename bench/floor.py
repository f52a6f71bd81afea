"""The floor: the least an agent loop can do for a workload, written out by hand.

zett's overhead is judged against this loop (target: zett ≤ 1.5x the floor on W1). It does
the work every agent loop must do and nothing else, so a reader can check in one screen
that nothing is missing and nothing is extra:

- the same model double as zett (``bench.zett_model.WorkloadModel``, reading the request
  built from the conversation), so the double's own cost is on both sides;
- one event object per step (each model event, the tool's start and result, the end);
- the tool's arguments validated by pydantic (a model built once from the signature);
- the tool awaited, or run in a worker thread when it is a plain function (the same thread
  hop zett uses, ``zett_agent._threads.run_in_thread``);
- the messages of the request kept in a list and handed to the model as a tuple.

No hooks, sessions, cancellation, errors, limits or history: the floor covers W1, W2 and
variants (b) and (c); the provider path and history variants are zett-specific work.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, get_type_hints

from pydantic import BaseModel, create_model

from bench.runner import Observation
from bench.workloads import ToolCounter, Workload
from bench.zett_model import WorkloadModel
from zett_agent._threads import run_in_thread
from zett_agent.messages import ToolMessage, UserMessage
from zett_agent.model import ModelEventType, ModelRequest

__all__ = ["FloorRunner", "build", "covers"]


class Event:
    """One step of a run, as a caller would see it."""

    __slots__ = ("data", "kind")

    def __init__(self, kind: str, data: Any) -> None:
        self.kind = kind
        self.data = data


def arguments_model(tool: Callable[..., Any]) -> type[BaseModel]:
    """The pydantic model of a tool's arguments, built once per tool from its signature."""
    hints = get_type_hints(tool)
    fields = {name: (hints[name], ...) for name in inspect.signature(tool).parameters}
    return create_model(f"{tool.__name__}_arguments", **fields)


async def floor_loop(
    model: WorkloadModel, tool: Callable[..., Any], arguments: type[BaseModel], text: str
) -> AsyncIterator[Event]:
    """The whole loop: model calls, an event per step, validated tool calls, until text."""
    is_async = inspect.iscoroutinefunction(tool)
    messages: list[Any] = [UserMessage(text)]
    yield Event("started", None)
    while True:
        response = None
        async for item in model.stream(ModelRequest(tuple(messages))):
            if item.type is ModelEventType.COMPLETED:
                response = item.response
            else:
                yield Event(item.type, item)
        message = response.message
        messages.append(message)
        if not message.tool_calls:
            yield Event("completed", message)
            return
        for call in message.tool_calls:
            yield Event("tool_started", call)
            valid = arguments.model_validate(call.arguments)
            kwargs = {name: getattr(valid, name) for name in type(valid).model_fields}
            if is_async:
                result = await tool(**kwargs)
            else:
                result = await run_in_thread(tool, **kwargs)
            messages.append(ToolMessage(call.id, call.name, str(result)))
            yield Event("tool_result", result)


def covers(workload: Workload) -> bool:
    """The workloads the floor can run (no provider path, no history)."""
    return not workload.provider and not workload.prior_messages


class FloorRunner:
    """The floor prepared for one workload."""

    name = "floor"
    version = "-"

    def __init__(self, workload: Workload, counter: ToolCounter) -> None:
        self.counter = counter
        self._model = WorkloadModel(workload)
        if workload.sync_tool:

            def add(a: int, b: int) -> int:
                return counter.add(a, b)
        else:

            async def add(a: int, b: int) -> int:
                return counter.add(a, b)

        self._tool = add
        self._arguments = arguments_model(add)

    async def request(self) -> None:
        async with aclosing(floor_loop(self._model, self._tool, self._arguments, "hi")) as events:
            async for _ in events:
                pass

    async def observe(self) -> Observation:
        before, deltas, answer = self.counter.calls, 0, ""
        async with aclosing(floor_loop(self._model, self._tool, self._arguments, "hi")) as events:
            async for event in events:
                if event.kind is ModelEventType.TEXT:
                    deltas += 1
                elif event.kind == "completed":
                    answer = event.data.content
        return Observation(self.counter.calls - before, deltas, answer)


async def build(workload: Workload) -> FloorRunner:
    if not covers(workload):
        raise LookupError(f"the floor does not cover {workload.name}")
    return FloorRunner(workload, ToolCounter())
