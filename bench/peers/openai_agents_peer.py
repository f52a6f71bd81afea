"""OpenAI Agents SDK: a custom ``Model`` whose ``stream_response`` yields Responses API events.

The SDK's runner reads the stream for ``response.output_item.done`` and the terminal
``response.completed`` (whose ``Response.output`` is the truth, as in our model protocol),
and forwards every event to the caller as a ``RawResponsesStreamEvent``. The double yields
what a real Responses stream carries for a function call (item added, one arguments delta,
item done, completed) and for a text answer (item added, content part added, 20 text deltas,
item done, completed). Tracing is disabled: it would otherwise try to export spans.

Variants: (a) unchanged (the SDK parses the function call's JSON argument text itself);
(b) a sync ``function_tool`` (the SDK runs it with ``asyncio.to_thread``); (c) the model
awaits one loop turn before each stream event; (d) the prior messages are passed as input
items ahead of the new user message, the SDK's documented way to continue a conversation
(``result.to_input_list()``), built once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

from bench.runner import Observation
from bench.workloads import (
    ANSWER_DELTAS,
    ANSWER_TEXT,
    TOOL_NAME,
    ToolCounter,
    Workload,
    add_arguments_json,
    prior_texts,
    tool_call_id,
)

SYSTEM_PROMPT = "You are a helpful assistant."


def _make_model_class() -> type:
    from agents import Model
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseContentPartAddedEvent,
        ResponseFunctionCallArgumentsDeltaEvent,
        ResponseFunctionToolCall,
        ResponseOutputItemAddedEvent,
        ResponseOutputItemDoneEvent,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseTextDeltaEvent,
    )

    def completed(output: list[Any], sequence_number: int) -> ResponseCompletedEvent:
        response = Response(
            id="resp_bench",
            created_at=0,
            model="zero-latency",
            object="response",
            output=output,
            tool_choice="auto",
            tools=[],
            top_p=None,
            parallel_tool_calls=False,
            status="completed",
        )
        return ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=sequence_number
        )

    class ZeroLatencyModel(Model):
        """Follows the shared workload rule, reading tool outputs from the input items."""

        def __init__(self, workload: Workload) -> None:
            self._wanted = workload.tool_calls
            self._turn_per_event = workload.turn_per_event
            # Delta events are never mutated by the runner, so they are built once.
            self._text_deltas = [
                ResponseTextDeltaEvent(
                    type="response.output_text.delta",
                    item_id="msg_bench",
                    output_index=0,
                    content_index=0,
                    delta=delta,
                    logprobs=[],
                    sequence_number=index + 2,
                )
                for index, delta in enumerate(ANSWER_DELTAS)
            ]

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark only streams")

        async def stream_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> AsyncIterator[Any]:
            events = self._events(input)
            if not self._turn_per_event:
                async for event in events:
                    yield event
                return
            async for event in events:
                await asyncio.sleep(0)
                yield event

        async def _events(self, input: Any) -> AsyncIterator[Any]:
            done = 0
            if not isinstance(input, str):
                # Tool outputs since the newest user message (scanning back stops there).
                for item in reversed(input):
                    if isinstance(item, dict):
                        if item.get("role") == "user":
                            break
                        done += item.get("type") == "function_call_output"
            if done < self._wanted:
                call_id = tool_call_id(done)
                arguments = add_arguments_json(done)
                call = ResponseFunctionToolCall(
                    id=f"fc_{done}",
                    call_id=call_id,
                    type="function_call",
                    name=TOOL_NAME,
                    arguments=arguments,
                    status="completed",
                )
                yield ResponseOutputItemAddedEvent(
                    type="response.output_item.added",
                    item=call.model_copy(update={"arguments": "", "status": "in_progress"}),
                    output_index=0,
                    sequence_number=0,
                )
                yield ResponseFunctionCallArgumentsDeltaEvent(
                    type="response.function_call_arguments.delta",
                    item_id=call.id,
                    output_index=0,
                    delta=arguments,
                    sequence_number=1,
                )
                yield ResponseOutputItemDoneEvent(
                    type="response.output_item.done", item=call, output_index=0, sequence_number=2
                )
                yield completed([call], 3)
                return
            text = ResponseOutputText(type="output_text", text="", annotations=[], logprobs=[])
            yield ResponseOutputItemAddedEvent(
                type="response.output_item.added",
                item=ResponseOutputMessage(
                    id="msg_bench",
                    type="message",
                    role="assistant",
                    status="in_progress",
                    content=[],
                ),
                output_index=0,
                sequence_number=0,
            )
            yield ResponseContentPartAddedEvent(
                type="response.content_part.added",
                item_id="msg_bench",
                output_index=0,
                content_index=0,
                part=text,
                sequence_number=1,
            )
            for event in self._text_deltas:
                yield event
            message = ResponseOutputMessage(
                id="msg_bench",
                type="message",
                role="assistant",
                status="completed",
                content=[text.model_copy(update={"text": ANSWER_TEXT})],
            )
            end = len(self._text_deltas) + 2
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done", item=message, output_index=0, sequence_number=end
            )
            yield completed([message], end + 1)

    return ZeroLatencyModel


class OpenAIAgentsRunner:
    """One Agents SDK ``Agent`` with the ``add`` function tool, run with ``Runner.run_streamed``."""

    name = "openai-agents"

    def __init__(self, workload: Workload) -> None:
        from agents import Agent, RunConfig, function_tool, set_tracing_disabled

        set_tracing_disabled(True)
        self.version = version("openai-agents")
        self.counter = ToolCounter()
        counter = self.counter

        if workload.sync_tool:

            @function_tool(name_override=TOOL_NAME)
            def add_in_a_thread(a: int, b: int) -> int:
                """Add two integers exactly."""
                return counter.add(a, b)

            add = add_in_a_thread
        else:

            @function_tool(name_override=TOOL_NAME)
            async def add(a: int, b: int) -> int:
                """Add two integers exactly."""
                return counter.add(a, b)

        model = _make_model_class()(workload)
        self._agent = Agent(name="bench", instructions=SYSTEM_PROMPT, model=model, tools=[add])
        self._run_config = RunConfig(tracing_disabled=True)
        # The SDK's default of 10 turns is below W2's 11 model calls.
        self._max_turns = workload.model_calls + 5
        self._prior = [
            {"role": role, "content": text} for role, text in prior_texts(workload.prior_messages)
        ]

    def _start(self) -> Any:
        from agents import Runner

        # A fresh list per request: the SDK keeps (and may extend) the input it is given.
        given: Any = [*self._prior, {"role": "user", "content": "hi"}] if self._prior else "hi"
        return Runner.run_streamed(
            self._agent, given, max_turns=self._max_turns, run_config=self._run_config
        )

    async def request(self) -> None:
        result = self._start()
        async for _ in result.stream_events():
            pass

    async def observe(self) -> Observation:
        before = self.counter.calls
        deltas = 0
        result = self._start()
        async for event in result.stream_events():
            if (
                event.type == "raw_response_event"
                and event.data.type == "response.output_text.delta"
            ):
                deltas += 1
        return Observation(self.counter.calls - before, deltas, str(result.final_output))


async def build(workload: Workload) -> OpenAIAgentsRunner:
    return OpenAIAgentsRunner(workload)
