"""The workloads every framework runs, defined once so that no runner can drift from them.

A workload is a number of sequential tool calls followed by a streamed answer: W1 makes one
call, W2 makes ten. Every framework's scripted model follows the same rule, read from the
conversation it is given: while the conversation holds fewer tool results *since its newest
user message* than the workload asks for, request ``add(a=<results so far>, b=1)``; then
stream ``ANSWER_DELTAS``. Deciding from the history (not from a counter inside the model)
keeps the doubles stateless, so one model object serves every request and every repetition;
scanning back only to the newest user message keeps a double's own cost flat when a session
has a long history before the request.

Variants of W1/W2 change one thing each, for every framework alike:

- ``provider`` (a): zett's model goes through its OpenAI-compatible provider path (request
  mapping, ``ChatCompletionChunk`` objects through its chunk mapping, JSON arguments parsed),
  with no HTTP; the peers' doubles already hand their framework JSON argument text to parse;
- ``sync_tool`` (b): ``add`` is a plain function, which each framework runs in a thread;
- ``turn_per_event`` (c): each double awaits one event-loop turn before every item it
  streams, as a network stream does;
- ``prior_messages`` (d): the session already holds that many messages (alternating user
  and assistant text) when the request starts, kept by each framework's own mechanism.

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
    "prior_texts",
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
    #: (a) zett through its OpenAI-compatible chunk mapping instead of a scripted model.
    provider: bool = False
    #: (b) a sync ``add`` tool (run in a worker thread) instead of an async one.
    sync_tool: bool = False
    #: (c) one event-loop turn before every item a model double streams.
    turn_per_event: bool = False
    #: (d) messages already in the session before the request.
    prior_messages: int = 0
    #: The workload this one varies (its zett figure is the reference of some targets).
    base: str | None = None

    @property
    def model_calls(self) -> int:
        """Model calls per request: one per tool call plus the final answer."""
        return self.tool_calls + 1


WORKLOADS: dict[str, Workload] = {
    "W1": Workload("W1", tool_calls=1),
    "W2": Workload("W2", tool_calls=10),
    "W1-provider": Workload("W1-provider", tool_calls=1, provider=True, base="W1"),
    "W2-provider": Workload("W2-provider", tool_calls=10, provider=True, base="W2"),
    "W1-sync-tool": Workload("W1-sync-tool", tool_calls=1, sync_tool=True, base="W1"),
    "W1-turn-per-event": Workload(
        "W1-turn-per-event", tool_calls=1, turn_per_event=True, base="W1"
    ),
    "W1-history-10": Workload("W1-history-10", tool_calls=1, prior_messages=10, base="W1"),
    "W1-history-1000": Workload(
        "W1-history-1000", tool_calls=1, prior_messages=1000, base="W1-history-10"
    ),
    "W1-history-5000": Workload(
        "W1-history-5000", tool_calls=1, prior_messages=5000, base="W1-history-10"
    ),
}


def prior_texts(count: int) -> list[tuple[str, str]]:
    """The session's earlier messages for variant (d): ``(role, text)``, user first."""
    return [
        ("user", f"Earlier question {index // 2}?")
        if index % 2 == 0
        else ("assistant", f"Earlier answer {index // 2}.")
        for index in range(count)
    ]


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
