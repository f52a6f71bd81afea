"""The conversation the ``CompactionExtension`` tests compact, and what builds it.

Sizes are chosen with the offline estimate (``estimate_tokens``): a user, agent or plain
assistant message made by ``sized(n)`` counts exactly ``n`` tokens. Every compaction test
module uses the ``offline_estimate`` fixture (``conftest.py``) so that estimate is what every
machine uses.
"""

from __future__ import annotations

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AnyMessage, AssistantMessage, ToolCall, UserMessage
from zett_agent.testing import ScriptedModel

from .support import Observer, lookup

CONFIG = AgentRunConfig(session_id="session-1")
SYSTEM_PROMPT = "Be brief."  # 7 tokens


def sized(tokens: int, letter: str = "x") -> str:
    """Content for which a one-part message estimates to exactly ``tokens`` tokens."""
    return letter * (4 * (tokens - 4))


def summary(text: str = "Short summary.", reasoning: str | None = None) -> AssistantMessage:
    return AssistantMessage(text, reasoning=reasoning)


class Conversation:
    """Three requests on one session; the third crosses ``max_tokens=400``.

    request 1: U1 (100) → A1 (100)
    request 2: U2 (100) → A2 calls lookup (9) → T2 (8) → A2b (100)
    request 3: U3 (50)  → before its model call the context holds 474 tokens

    The agent keeps history in ``memory`` and reports to ``observer``; ``compaction``
    summarises with ``summariser`` (``None``: the request's model). A test may replace
    ``primary`` before ``after_two_requests`` to script the third request differently.
    """

    def __init__(
        self,
        summariser=None,
        *,
        max_tokens: int = 400,
        keep_recent_tokens: int = 250,
    ) -> None:
        self.u1 = UserMessage(sized(100, "a"))
        self.a1 = AssistantMessage(sized(100, "b"))
        self.u2 = UserMessage(sized(100, "c"))
        self.a2 = AssistantMessage(tool_calls=(ToolCall("call-1", "lookup", {"key": "k"}),))
        self.a2b = AssistantMessage(sized(100, "d"))
        self.u3 = UserMessage(sized(50, "e"))
        self.a3 = AssistantMessage("done")
        self.summariser = summariser
        self.primary = ScriptedModel([self.a1, self.a2, self.a2b, self.a3])
        self.memory = InMemoryMessageAccumulator()
        self.observer = Observer()
        self.compaction = CompactionExtension(
            summariser, max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens
        )

    async def after_two_requests(self) -> Agent:
        """An agent that has answered requests 1 and 2; the observer starts empty."""
        agent = await Agent.create(
            self.primary,
            system_prompt=SYSTEM_PROMPT,
            tools=[lookup],
            extensions=[self.memory, self.compaction, self.observer],
        )
        await agent.run(self.u1, config=CONFIG)
        await agent.run(self.u2, config=CONFIG)
        self.observer.events.clear()
        return agent

    def stored(self) -> tuple[AnyMessage, ...]:
        """The history memory keeps for the session."""
        return self.memory.messages(CONFIG.session_id)
