"""The crash-continuation benchmark's model and assistant (``bench.crash_stress``).

Asked ``tally <n> <deltas> <ms>``, the model calls the ``tally`` tool ``n`` times, one call
a turn, then streams an answer of ``deltas`` characters ``ms`` apart. The number a call
asks for is one more than the ``tally`` results since the user's message, so a model call
made again after a crash asks for the same number. ``tally`` is ``atomic``: it stores a
``Note`` titled ``<request id> <number>`` in the transaction that also stores its result,
so however the workers die, each number of each run is stored once (the benchmark counts
them: a second note is a *duplicated* effect, a missing one a *lost* effect).

Served with ``ZETT_MODEL=bench.crash_model:crash_model``,
``ZETT_ASSISTANTS=bench.crash_model.Tally`` and ``ZETT_DEFAULT_ASSISTANT=tally``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

from agent_app.assistants import Assistant
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage, content_text
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
from zett_agent.tools import tool
from zett_agent.tools.base import current_run_context

__all__ = ["CrashModel", "Tally", "crash_model", "tally"]


@tool(atomic=True)
def tally(number: int) -> str:
    """Count one step of the benchmark's work.

    Args:
        number: Which step this is (1 for the first).

    Guidelines:
        - Call it once for each step you are asked to count.
    """
    from agent_app.models import ChatSession
    from zett_site.models import Note

    context = current_run_context()
    session = ChatSession.objects.get(pk=context.session_id)
    Note.objects.create(session=session, title=f"{context.request_id} {number}", text="")
    return f"tallied {number}"


class Tally(Assistant):
    id = "tally"
    name = "Tally"
    instructions = "Count the steps you are asked to count with the tally tool."
    tools = [tally]


class CrashModel:
    """``tally <n> <deltas> <ms>`` (see the module docstring); anything else: ``ok``."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        command: list[str] = []
        done = 0
        for message in reversed(request.messages):
            if isinstance(message, ToolMessage) and message.name == "tally":
                done += 1
            elif isinstance(message, UserMessage):
                command = content_text(message.content).split()
                break
        if len(command) != 4 or command[0] != "tally" or not command[1].isdigit():
            yield ModelEvent.completed(ModelResponse(AssistantMessage(content="ok")))
            return
        wanted, deltas, pause = int(command[1]), int(command[2]), float(command[3]) / 1000
        if done < wanted:
            call = ToolCall(f"tally-{uuid.uuid4().hex[:12]}", "tally", {"number": done + 1})
            yield ModelEvent.completed(
                ModelResponse(AssistantMessage(tool_calls=(call,)), finish_reason="tool_calls")
            )
            return
        for _ in range(deltas):
            await asyncio.sleep(pause)
            yield ModelEvent.text("x")
        yield ModelEvent.completed(
            ModelResponse(AssistantMessage(content="x" * deltas), finish_reason="stop")
        )


def crash_model() -> CrashModel:
    """Factory named by ``ZETT_MODEL``."""
    return CrashModel()
