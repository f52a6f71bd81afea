"""zett: ``Agent.stream`` over ``WorkloadModel``, with no extensions and an async ``add`` tool.

``extensions=[]`` drops the default in-memory history and tool guidelines: the peers keep
no history between runs either, and every request starts from the system prompt and the
user's message. All requests share one session id; they run one after another, so the
session is free again when the next one starts.
"""

from __future__ import annotations

from contextlib import aclosing

from bench.runner import Observation
from bench.workloads import TOOL_NAME, ToolCounter, Workload
from bench.zett_model import WorkloadModel
from zett_agent import __version__
from zett_agent.tools.base import AgentTool, tool

SESSION_ID = "bench-session"


def make_add_tool(counter: ToolCounter) -> AgentTool:
    """The workload's ``add`` tool, counting its executions in ``counter``."""

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

    def __init__(self, agent: object, counter: ToolCounter) -> None:
        from zett_agent.agent import AgentRunConfig

        self.counter = counter
        self._agent = agent
        self._config = AgentRunConfig(session_id=SESSION_ID)

    async def request(self) -> None:
        async with aclosing(self._agent.stream("hi", config=self._config)) as events:
            async for _ in events:
                pass

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
        return Observation(self.counter.calls - before, deltas, answer)


async def build(workload: Workload) -> ZettRunner:
    from zett_agent.agent import Agent

    counter = ToolCounter()
    agent = await Agent.create(
        WorkloadModel(workload), tools=[make_add_tool(counter)], extensions=[]
    )
    return ZettRunner(agent, counter)
