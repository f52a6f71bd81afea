"""The workloads every framework runs, defined once so that no runner can drift from them.

A workload is a number of sequential tool calls followed by a streamed answer: W1 makes one
call, W2 makes ten. Every framework's scripted model follows the same rule, read from the
conversation it is given: while the conversation holds fewer tool results than the workload
asks for, request ``add(a=<results so far>, b=1)``; then stream ``ANSWER_DELTAS``. Deciding
from the history (not from a counter inside the model) keeps the doubles stateless, so one
model object serves every request and every repetition.

``ToolCounter`` is incremented by every framework's ``add`` tool: a runner that skipped the
tool (or ran it twice) shows up as a wrong count instead of as a suspiciously fast result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    "ANSWER_DELTAS",
    "ANSWER_TEXT",
    "TOOL_NAME",
    "WORKLOADS",
    "ToolCounter",
    "Workload",
    "add_arguments",
    "add_arguments_json",
    "tool_call_id",
]

#: The 20 text deltas of the final answer, identical for every framework.
ANSWER_DELTAS: tuple[str, ...] = tuple(f"w{index} " for index in range(20))
ANSWER_TEXT = "".join(ANSWER_DELTAS)
TOOL_NAME = "add"


@dataclass(frozen=True, slots=True)
class Workload:
    """One request shape: ``tool_calls`` sequential calls of ``add``, then the answer."""

    name: str
    tool_calls: int

    @property
    def model_calls(self) -> int:
        """Model calls per request: one per tool call plus the final answer."""
        return self.tool_calls + 1


WORKLOADS: dict[str, Workload] = {
    "W1": Workload("W1", tool_calls=1),
    "W2": Workload("W2", tool_calls=10),
}


def add_arguments(results_so_far: int) -> dict[str, int]:
    """Arguments of the next ``add`` call; they vary so that no framework can cache a result."""
    return {"a": results_so_far, "b": 1}


def add_arguments_json(results_so_far: int) -> str:
    """The same arguments as the JSON text a provider would stream."""
    return json.dumps(add_arguments(results_so_far), separators=(",", ":"))


def tool_call_id(results_so_far: int) -> str:
    """A call id unique within one request, as providers guarantee."""
    return f"call_{results_so_far}"


class ToolCounter:
    """Counts executions of the ``add`` tool across all requests of one framework."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls = 0

    def add(self, a: int, b: int) -> int:
        """The tool body shared by every framework: count the call, return the sum."""
        self.calls += 1
        return a + b
