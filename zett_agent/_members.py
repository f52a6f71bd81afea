"""The members of the runtime's two hot enums as plain namespaces: ``E`` (event types) and
``P`` (phases).

An enum class's attribute is looked up through its metaclass on every read; a namespace's
is a dict entry the interpreter caches. The runtime's per-event code reads them often, so
it reads them here; the members themselves are the enums' own.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from zett_agent.events import AgentEventType
from zett_agent.phases import AgentPhase

__all__ = ["E", "P"]

E: Any = SimpleNamespace(**AgentEventType.__members__)
P: Any = SimpleNamespace(**AgentPhase.__members__)
