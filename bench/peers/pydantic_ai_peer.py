"""pydantic-ai: a ``FunctionModel`` with a stream function, drained via ``run_stream_events``.

Variants: (a) unchanged (the stream function hands pydantic-ai JSON argument text to parse);
(b) a sync ``tool_plain`` (pydantic-ai runs it in a worker thread); (c) the stream function
awaits one loop turn before each item; (d) the prior messages are passed as
``message_history`` (pydantic-ai's own way to continue a conversation), built once.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

from bench.runner import Observation
from bench.workloads import (
    ANSWER_DELTAS,
    TOOL_NAME,
    ToolCounter,
    Workload,
    add_arguments_json,
    prior_texts,
    tool_call_id,
)

SYSTEM_PROMPT = "You are a helpful assistant."


class PydanticAIRunner:
    """One pydantic-ai ``Agent`` with the ``add`` tool and a zero-latency streamed model."""

    name = "pydantic-ai"

    def __init__(self, workload: Workload) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.messages import (
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolReturnPart,
            UserPromptPart,
        )
        from pydantic_ai.models.function import DeltaToolCall, FunctionModel

        self.version = version("pydantic-ai-slim")
        self.counter = ToolCounter()
        counter = self.counter
        wanted = workload.tool_calls
        turn_per_event = workload.turn_per_event

        def results_so_far(messages: list[Any]) -> int:
            """Tool results since the newest user prompt (scanning back stops there)."""
            done = 0
            for message in reversed(messages):
                if isinstance(message, ModelRequest):
                    for part in message.parts:
                        if isinstance(part, UserPromptPart):
                            return done
                        done += isinstance(part, ToolReturnPart)
            return done

        async def stream_function(messages: list[Any], info: Any):
            done = results_so_far(messages)
            if done < wanted:
                if turn_per_event:
                    await asyncio.sleep(0)
                yield {
                    0: DeltaToolCall(
                        name=TOOL_NAME,
                        json_args=add_arguments_json(done),
                        tool_call_id=tool_call_id(done),
                    )
                }
                return
            for delta in ANSWER_DELTAS:
                if turn_per_event:
                    await asyncio.sleep(0)
                yield delta

        self._agent = Agent(
            FunctionModel(stream_function=stream_function), instructions=SYSTEM_PROMPT
        )
        self._history: list[Any] | None = None
        if workload.prior_messages:
            self._history = [
                ModelRequest(parts=[UserPromptPart(text)])
                if role == "user"
                else ModelResponse(parts=[TextPart(text)])
                for role, text in prior_texts(workload.prior_messages)
            ]

        if workload.sync_tool:

            @self._agent.tool_plain(name=TOOL_NAME)
            def add_in_a_thread(a: int, b: int) -> int:
                """Add two integers exactly."""
                return counter.add(a, b)

        else:

            @self._agent.tool_plain(name=TOOL_NAME)
            async def add(a: int, b: int) -> int:
                """Add two integers exactly."""
                return counter.add(a, b)

    async def request(self) -> None:
        async with self._agent.run_stream_events("hi", message_history=self._history) as events:
            async for _ in events:
                pass

    async def observe(self) -> Observation:
        from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

        before = self.counter.calls
        deltas: list[str] = []
        async with self._agent.run_stream_events("hi", message_history=self._history) as events:
            async for event in events:
                # The first text chunk arrives inside the PartStartEvent, the rest as deltas.
                if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                    deltas.append(event.part.content)
                elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                    deltas.append(event.delta.content_delta)
            result = events.result
        answer = result.output if result is not None else ""
        return Observation(self.counter.calls - before, len(deltas), answer)


async def build(workload: Workload) -> PydanticAIRunner:
    return PydanticAIRunner(workload)
