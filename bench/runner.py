"""What the harness needs from each framework: one streamed request, and a checked one.

``request()`` is the timed unit: send one user message and drain the framework's streaming
API to the end, doing nothing with the events (every framework pays the same for that).
``observe()`` runs the same request but counts what came out, so the harness can prove the
tool really ran and the 20 deltas really streamed before it trusts any timing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bench.workloads import ToolCounter

__all__ = ["Observation", "Runner"]


@dataclass(frozen=True, slots=True)
class Observation:
    """What one checked request produced."""

    tool_calls: int
    text_deltas: int
    answer: str


class Runner(Protocol):
    """A framework prepared for one workload."""

    #: Display name, e.g. ``"pydantic-ai"``.
    name: str
    #: Installed version of the framework.
    version: str
    #: Incremented by the framework's ``add`` tool.
    counter: ToolCounter

    async def request(self) -> None:
        """Run one request, streamed to the end."""
        ...

    async def observe(self) -> Observation:
        """Run one request and report what it streamed and executed."""
        ...
