"""The public signatures docs/runtime.md documents, pinned parameter by parameter.

Names, order, keyword-only markers and defaults are part of the contract: callers pass
them by name, and an acceptance suite checks them against the specification.
"""

from __future__ import annotations

import inspect

import pytest

from zett_agent.agent import Agent, AgentRunConfig, AgentRunContext
from zett_agent.extensions.external import ExternalEventExtension
from zett_agent.tools.base import AgentTool

P = inspect.Parameter
EMPTY = P.empty


def shape(function) -> list[tuple[str, object, object]]:
    """``(name, kind, default)`` of every parameter except ``self``."""
    return [
        (name, parameter.kind, parameter.default)
        for name, parameter in inspect.signature(function).parameters.items()
        if name != "self"
    ]


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (
            ExternalEventExtension.__init__,
            [
                ("response_event_name", P.KEYWORD_ONLY, EMPTY),
                ("correlation_field", P.KEYWORD_ONLY, EMPTY),
                ("timeout", P.KEYWORD_ONLY, None),  # our addition: wait deadlines
            ],
        ),
        (
            AgentRunContext.publish,
            [("extension_event", P.POSITIONAL_OR_KEYWORD, EMPTY), ("target", P.KEYWORD_ONLY, None)],
        ),
        (
            AgentTool,
            [
                ("name", P.POSITIONAL_OR_KEYWORD, EMPTY),
                ("description", P.POSITIONAL_OR_KEYWORD, EMPTY),
                ("parameters", P.POSITIONAL_OR_KEYWORD, EMPTY),
                ("handler", P.POSITIONAL_OR_KEYWORD, EMPTY),
                ("guidelines", P.POSITIONAL_OR_KEYWORD, ()),
                ("snippet", P.POSITIONAL_OR_KEYWORD, None),
            ],
        ),
        (
            AgentRunConfig,
            [
                ("session_id", P.POSITIONAL_OR_KEYWORD, None),
                ("request_id", P.POSITIONAL_OR_KEYWORD, None),
                ("parent_session_id", P.POSITIONAL_OR_KEYWORD, None),
            ],
        ),
        (
            Agent.__init__,
            [
                ("model", P.POSITIONAL_OR_KEYWORD, EMPTY),
                ("system_prompt", P.KEYWORD_ONLY, "You are a helpful assistant."),
                ("tools", P.KEYWORD_ONLY, ()),
                ("extensions", P.KEYWORD_ONLY, None),
                ("max_iterations", P.KEYWORD_ONLY, 36),
                ("max_internal_messages", P.KEYWORD_ONLY, 8),
            ],
        ),
        (
            Agent.stream,
            [
                ("message", P.POSITIONAL_OR_KEYWORD, EMPTY),
                ("config", P.KEYWORD_ONLY, None),
                ("model", P.KEYWORD_ONLY, None),
                ("metadata", P.KEYWORD_ONLY, None),
                ("tags", P.KEYWORD_ONLY, None),
            ],
        ),
        (
            Agent.emit_external_event,
            [("event", P.POSITIONAL_OR_KEYWORD, EMPTY), ("config", P.KEYWORD_ONLY, None)],
        ),
        (
            Agent.compact,
            [("config", P.KEYWORD_ONLY, None), ("model", P.KEYWORD_ONLY, None)],
        ),
    ],
    ids=lambda value: getattr(value, "__qualname__", None) or "",
)
def test_the_documented_signature(function, expected):
    assert shape(function) == expected


def test_the_tools_own_caches_are_not_constructor_parameters():
    with pytest.raises(TypeError):
        AgentTool("t", "Does t.", {"type": "object"}, lambda: None, _validator=None)
