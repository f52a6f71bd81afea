"""LangGraph: ``create_react_agent`` around a fake chat model, streamed with ``"messages"``.

``GenericFakeChatModel`` cannot bind tools or stream tool-call chunks, so the double is a
small ``BaseChatModel`` subclass: ``bind_tools`` binds OpenAI-style tool schemas (as a real
provider integration does, which is what ``create_react_agent`` checks), and ``_astream``
yields tool-call chunks or the 20 text chunks. ``stream_mode="messages"`` makes LangGraph
call the model through its streaming path and forward every chunk to the caller.

Variants: (a) unchanged (LangGraph parses the tool-call chunks' JSON argument text);
(b) a sync ``@tool`` (its ``ainvoke`` runs the function in an executor thread); (c) the
model awaits one loop turn before each chunk; (d) the prior messages (built once) are
passed in the graph's ``messages`` state ahead of the new user message, which is how a
graph without a checkpointer continues a conversation.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Sequence
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


def _make_model_class() -> type:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGenerationChunk, ChatResult
    from langchain_core.utils.function_calling import convert_to_openai_tool

    class ZeroLatencyChatModel(BaseChatModel):
        """Follows the shared workload rule, counting ``ToolMessage``s in the history."""

        wanted: int
        turn_per_event: bool = False

        @property
        def _llm_type(self) -> str:
            return "zero-latency"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self.bind(tools=[convert_to_openai_tool(item) for item in tools], **kwargs)

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            raise NotImplementedError("the benchmark only streams")

        async def _astream(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> AsyncIterator[ChatGenerationChunk]:
            done = 0  # tool results since the newest user message (scanning back stops there)
            for message in reversed(messages):
                if isinstance(message, HumanMessage):
                    break
                done += isinstance(message, ToolMessage)
            if done < self.wanted:
                if self.turn_per_event:
                    await asyncio.sleep(0)
                yield ChatGenerationChunk(
                    message=AIMessageChunk(
                        content="",
                        tool_call_chunks=[
                            {
                                "name": TOOL_NAME,
                                "args": add_arguments_json(done),
                                "id": tool_call_id(done),
                                "index": 0,
                                "type": "tool_call_chunk",
                            }
                        ],
                        chunk_position="last",
                    )
                )
                return
            last = len(ANSWER_DELTAS) - 1
            for index, delta in enumerate(ANSWER_DELTAS):
                if self.turn_per_event:
                    await asyncio.sleep(0)
                yield ChatGenerationChunk(
                    message=AIMessageChunk(
                        content=delta, chunk_position="last" if index == last else None
                    )
                )

    return ZeroLatencyChatModel


class LangGraphRunner:
    """A prebuilt ReAct graph with the ``add`` tool, streamed in ``"messages"`` mode."""

    name = "langgraph"

    def __init__(self, workload: Workload) -> None:
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.tools import tool
        from langgraph.prebuilt import create_react_agent

        self.version = version("langgraph")
        self.counter = ToolCounter()
        counter = self.counter

        if workload.sync_tool:

            @tool(TOOL_NAME)
            def add_in_a_thread(a: int, b: int) -> int:
                """Add two integers exactly."""
                return counter.add(a, b)

            add = add_in_a_thread
        else:

            @tool(TOOL_NAME)
            async def add(a: int, b: int) -> int:
                """Add two integers exactly."""
                return counter.add(a, b)

        model = _make_model_class()(
            wanted=workload.tool_calls, turn_per_event=workload.turn_per_event
        )
        with warnings.catch_warnings():
            # Deprecated in favour of langchain.agents.create_agent, which lives in another
            # package; the prebuilt graph is still LangGraph's own ReAct loop.
            warnings.simplefilter("ignore")
            self._graph = create_react_agent(model, [add], prompt=SYSTEM_PROMPT)
        self._prior = [
            HumanMessage(text) if role == "user" else AIMessage(text)
            for role, text in prior_texts(workload.prior_messages)
        ]
        self._config = {"recursion_limit": 4 * workload.model_calls + 10}

    def _input(self) -> dict[str, Any]:
        # A fresh state per request; the prior message objects themselves are reused.
        return {"messages": [*self._prior, ("user", "hi")]}

    async def request(self) -> None:
        async for _ in self._graph.astream(self._input(), self._config, stream_mode="messages"):
            pass

    async def observe(self) -> Observation:
        from langchain_core.messages import AIMessageChunk

        before = self.counter.calls
        deltas: list[str] = []
        async for chunk, _metadata in self._graph.astream(
            self._input(), self._config, stream_mode="messages"
        ):
            if isinstance(chunk, AIMessageChunk) and chunk.content:
                deltas.append(chunk.content)
        return Observation(self.counter.calls - before, len(deltas), "".join(deltas))


async def build(workload: Workload) -> LangGraphRunner:
    return LangGraphRunner(workload)
