"""The model of the security tests' servers (``ZETT_MODEL=tests.app.security_models:wordy``).

It answers by the user's message:

- ``slow <words> <seconds>``: that many words, one delta each, ``seconds`` apart (a run
  that is still going while the test re-attaches, revokes, ...);
- ``big <bytes> [<seconds>]``: a text answer of that many bytes, in 16 KiB deltas,
  ``seconds`` apart (default: as fast as the server takes them): an answer that piles up
  in a stream nobody reads;
- ``tool <name>``: a call of the tool ``<name>`` (which may not exist), then ``Done.``;
- anything else: a short answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, content_text
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
from zett_agent.testing import ScriptedModel

DELTA_BYTES = 16 * 1024


class WordyModel:
    def __init__(self) -> None:
        self.script = ScriptedModel()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            message = AssistantMessage(content="Done.")
        else:
            words = content_text(last.content).split()
            if words[:1] == ["slow"]:
                async for event in _slow(int(words[1]), float(words[2])):
                    yield event
                return
            if words[:1] == ["big"]:
                pace = float(words[2]) if len(words) > 2 else 0.0
                async for event in _big(int(words[1]), pace):
                    yield event
                return
            if words[:1] == ["tool"]:
                call = ToolCall(id="call-1", name=words[1], arguments={})
                message = AssistantMessage(tool_calls=(call,))
            else:
                message = AssistantMessage(content="A short answer.")
        for event in self.script.events_for(message):
            yield event


async def _slow(count: int, pace: float) -> AsyncIterator[ModelEvent]:
    for _ in range(count):
        yield ModelEvent.text("word ")
        await asyncio.sleep(pace)
    yield _completed("word " * count)


async def _big(size: int, pace: float) -> AsyncIterator[ModelEvent]:
    piece = "y" * DELTA_BYTES
    for _ in range(size // DELTA_BYTES):
        yield ModelEvent.text(piece)
        await asyncio.sleep(pace)
    yield _completed(piece * (size // DELTA_BYTES))


def _completed(text: str) -> ModelEvent:
    return ModelEvent.completed(ModelResponse(AssistantMessage(content=text), "stop"))


def wordy() -> WordyModel:
    return WordyModel()
