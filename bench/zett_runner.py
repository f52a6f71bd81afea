"""zett: ``Agent.stream`` over ``WorkloadModel``, with no extensions and an async ``add`` tool.

``extensions=[]`` drops the default in-memory history and tool guidelines: the peers keep
no history between runs either, and every request starts from the system prompt and the
user's message. All requests share one session id; they run one after another, so the
session is free again when the next one starts.

Variants (``bench.workloads``): (a) ``ProviderWorkloadModel`` instead of the scripted model;
(b) a sync ``add``; (c) a model that awaits one loop turn per event; (d) the default
extensions, with the session's history in ``InMemoryMessageAccumulator`` holding the prior
messages; after each request the history is truncated back to them (an O(1) step per
message dropped), so every request starts from the same ``prior_messages``.
"""

from __future__ import annotations

from contextlib import aclosing

from bench.runner import Observation
from bench.workloads import TOOL_NAME, ToolCounter, Workload, prior_texts
from bench.zett_model import ProviderWorkloadModel, WorkloadModel
from zett_agent import __version__
from zett_agent.tools.base import AgentTool, tool

SESSION_ID = "bench-session"


def make_add_tool(counter: ToolCounter, *, sync: bool = False) -> AgentTool:
    """The workload's ``add`` tool, counting its executions in ``counter``."""

    if sync:

        @tool(name=TOOL_NAME)
        def add_in_a_thread(a: int, b: int) -> int:
            """Add two integers exactly.

            Guidelines:
                - Use for any integer addition.
            """
            return counter.add(a, b)

        return add_in_a_thread

    @tool(name=TOOL_NAME)
    async def add(a: int, b: int) -> int:
        """Add two integers exactly.

        Guidelines:
            - Use for any integer addition.
        """
        return counter.add(a, b)

    return add


class ZettRunner:
    """One initialized zett ``Agent`` prepared for a workload."""

    name = "zett"
    version = __version__

    def __init__(self, agent: object, counter: ToolCounter, memory: object = None) -> None:
        from zett_agent.agent import AgentRunConfig

        self.counter = counter
        self._agent = agent
        self._config = AgentRunConfig(session_id=SESSION_ID)
        self._memory = memory
        self._prior = len(memory.messages(SESSION_ID)) if memory is not None else 0

    async def request(self) -> None:
        async with aclosing(self._agent.stream("hi", config=self._config)) as events:
            async for _ in events:
                pass
        if self._memory is not None:
            self._memory.truncate(SESSION_ID, self._prior)

    async def observe(self) -> Observation:
        from zett_agent.events import AgentEventType

        before = self.counter.calls
        deltas = 0
        answer = ""
        async with aclosing(self._agent.stream("hi", config=self._config)) as events:
            async for event in events:
                if event.type is AgentEventType.TEXT_DELTA:
                    deltas += 1
                elif event.type is AgentEventType.RUN_COMPLETED:
                    answer = event.message.content
        if self._memory is not None:
            self._memory.truncate(SESSION_ID, self._prior)
        return Observation(self.counter.calls - before, deltas, answer)


async def build(workload: Workload) -> ZettRunner:
    from zett_agent.agent import Agent
    from zett_agent.extensions.memory import InMemoryMessageAccumulator
    from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
    from zett_agent.messages import AssistantMessage, UserMessage

    counter = ToolCounter()
    model = ProviderWorkloadModel(workload) if workload.provider else WorkloadModel(workload)
    memory = None
    extensions: list = []
    if workload.prior_messages:
        memory = InMemoryMessageAccumulator()
        memory.load(
            SESSION_ID,
            [
                UserMessage(text) if role == "user" else AssistantMessage(text)
                for role, text in prior_texts(workload.prior_messages)
            ],
        )
        extensions = [memory, ToolGuidelinesExtension()]
    agent = await Agent.create(
        model,
        tools=[make_add_tool(counter, sync=workload.sync_tool)],
        extensions=extensions,
    )
    return ZettRunner(agent, counter, memory)
