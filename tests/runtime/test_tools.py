"""``@tool``, ``AgentTool`` and ``current_tool_call_id`` (docs/runtime.md, Tools)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from typing import Annotated, Literal

import pytest
from pydantic import Field

from zett_agent.model import ToolDefinition
from zett_agent.tools import AgentTool as ReexportedAgentTool
from zett_agent.tools import tool as reexported_tool
from zett_agent.tools.base import (
    AgentTool,
    ToolResult,
    current_tool_call_id,
    to_tool_result,
    tool,
)

from .support import counting_tool


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers exactly.

    Only whole numbers are supported.

    Args:
        a: The first addend.
        b: The second addend.

    Snippet:
        add(a=2, b=3)

    Guidelines:
        - Use for any integer addition.
        - Never add numbers in your head.
    """
    return a + b


def test_the_tools_package_reexports_the_base_module():
    assert ReexportedAgentTool is AgentTool
    assert reexported_tool is tool


def test_a_bare_decorator_turns_a_function_into_a_tool():
    assert isinstance(add, AgentTool)
    assert add.name == "add"
    assert add.snippet == "add(a=2, b=3)"
    assert add.guidelines == ("Use for any integer addition.", "Never add numbers in your head.")


def test_the_description_is_the_first_paragraph_of_the_docstring():
    assert add.description == "Add two integers exactly."


def test_parameters_become_a_json_schema_with_argument_descriptions():
    schema = add.parameters
    assert schema["type"] == "object"
    assert schema["properties"]["a"]["type"] == "integer"
    assert schema["properties"]["a"]["description"] == "The first addend."
    assert schema["properties"]["b"]["description"] == "The second addend."
    assert schema["required"] == ["a"]


def test_the_definition_offered_to_the_model_mirrors_the_tool():
    assert add.definition == ToolDefinition(
        name="add", description="Add two integers exactly.", parameters=add.parameters
    )


def test_decorator_options_override_the_docstring():
    @tool(name="sum_two", snippet="sum_two(a=1)", guidelines=["Prefer this tool."])
    def anything(a: int) -> int:
        """Sum things."""
        return a

    assert anything.name == "sum_two"
    assert anything.snippet == "sum_two(a=1)"
    assert anything.guidelines == ("Prefer this tool.",)


def test_a_tool_without_a_description_is_rejected():
    def undocumented(a: int) -> int:
        return a

    with pytest.raises(ValueError, match="description"):
        tool(undocumented)


def test_a_tool_without_a_guideline_is_rejected():
    def unguided(a: int) -> int:
        """Do something."""
        return a

    with pytest.raises(ValueError, match="guideline"):
        tool(unguided)


def test_enumerated_parameters_appear_in_the_schema():
    @tool
    def paint(colour: Literal["red", "blue"]) -> str:
        """Paint the wall.

        Guidelines:
            - Ask before painting.
        """
        return colour

    assert paint.parameters["properties"]["colour"]["enum"] == ["red", "blue"]


async def test_arguments_are_validated_before_the_body_runs():
    ran: list[int] = []
    with pytest.raises(ValueError, match="number"):
        await counting_tool(ran).invoke({"number": "many"})
    assert ran == []


async def test_unknown_argument_keys_are_rejected():
    with pytest.raises(ValueError, match="extra"):
        await add.invoke({"a": 1, "extra": 2})


async def test_missing_required_arguments_are_rejected():
    with pytest.raises(ValueError, match="a"):
        await add.invoke({"b": 2})


async def test_validated_arguments_are_coerced_and_defaulted():
    assert await add.invoke({"a": "2"}) == 2


async def test_sync_bodies_run_in_a_worker_thread():
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        """Report the thread.

        Guidelines:
            - Use in tests only.
        """
        return threading.get_ident()

    assert await where.invoke({}) != loop_thread


async def test_sync_bodies_of_concurrent_calls_run_at_the_same_time():
    both_inside = threading.Barrier(3, timeout=10)

    @tool
    def meet(label: str) -> str:
        """Wait until the other call is running too.

        Guidelines:
            - Use in tests only.
        """
        both_inside.wait()
        return label

    first = asyncio.ensure_future(meet.invoke({"label": "a"}))
    second = asyncio.ensure_future(meet.invoke({"label": "b"}))
    await asyncio.to_thread(both_inside.wait)  # returns only once both bodies are inside
    assert await asyncio.gather(first, second) == ["a", "b"]


async def test_a_sync_body_sees_the_context_of_its_call_and_its_errors_reach_the_caller():
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker")
    marker.set("from the caller")

    @tool
    def read() -> str:
        """Read the marker.

        Guidelines:
            - Use in tests only.
        """
        return marker.get()

    @tool
    def broken() -> str:
        """Fail.

        Guidelines:
            - Use in tests only.
        """
        raise KeyError("missing")

    assert await read.invoke({}) == "from the caller"
    with pytest.raises(KeyError, match="missing"):
        await broken.invoke({})


async def test_async_bodies_run_on_the_event_loop_thread():
    loop_thread = threading.get_ident()

    @tool
    async def where() -> int:
        """Report the thread.

        Guidelines:
            - Use in tests only.
        """
        return threading.get_ident()

    assert await where.invoke({}) == loop_thread


def test_there_is_no_current_tool_call_outside_a_tool():
    assert current_tool_call_id() is None


def test_a_hand_written_tool_needs_a_valid_name_and_description():
    with pytest.raises(ValueError, match="name"):
        AgentTool(name="has space", description="d", parameters={}, handler=lambda: None)
    with pytest.raises(ValueError, match="description"):
        AgentTool(name="ok", description=" ", parameters={}, handler=lambda: None)


def test_a_tool_result_succeeds_by_default():
    result = ToolResult(content="done")
    assert result.success is True
    assert result.attributes == {}


@pytest.mark.parametrize(
    "value", [0, 7, -12, 10**30, True, False, None, 1.5, "text", {"a": [1, None]}]
)
def test_a_returned_value_becomes_its_json_text(value):
    expected = value if isinstance(value, str) else json.dumps(value)
    result = to_tool_result(value)
    assert result.content == expected
    assert result.success is True


def test_an_int_subclass_is_serialised_as_json_not_as_its_str():
    class Flag(int):
        def __str__(self) -> str:
            return "flag"

    assert to_tool_result(Flag(3)).content == "3"


def test_a_single_guidelines_string_is_one_guideline():
    @tool(guidelines="One rule.")
    def ruled(a: int) -> int:
        """Do something."""
        return a

    assert ruled.guidelines == ("One rule.",)
    hand_written = AgentTool("ruled", "Do something.", {"type": "object"}, ruled.handler, "Rule.")
    assert hand_written.guidelines == ("Rule.",)


def test_annotated_field_descriptions_reach_the_schema():
    @tool
    def weather(
        city: Annotated[str, Field(description="The city, in English")],
        days: Annotated[int, Field(ge=1, description="Ignored: Args wins")] = 1,
    ) -> str:
        """Tell the weather.

        Args:
            days: How many days ahead.

        Guidelines:
            - Use for weather questions.
        """
        return city

    properties = weather.parameters["properties"]
    assert properties["city"]["description"] == "The city, in English"
    assert properties["days"]["description"] == "How many days ahead."
    assert properties["days"]["minimum"] == 1


async def test_more_concurrent_sync_calls_than_workers_queue_and_leave_the_pool_sound(
    monkeypatch,
):
    import zett_agent._threads as threads

    capacity = threads._workers + 2
    monkeypatch.setattr(threads, "MAX_WORKERS", capacity)
    gate = threading.Event()

    @tool
    def queued(label: int) -> int:
        """Wait for the gate, then return the label.

        Guidelines:
            - Use in tests only.
        """
        gate.wait(10)
        return label

    calls = [asyncio.ensure_future(queued.invoke({"label": n})) for n in range(capacity + 4)]
    gate.set()
    assert await asyncio.gather(*calls) == list(range(capacity + 4))

    # Every worker must be usable at once again: a miscounted pool would leave one of these
    # calls waiting behind another, and the barrier would break instead of opening.
    everyone = threading.Barrier(capacity, timeout=10)

    @tool
    def meet_all(label: int) -> int:
        """Wait until every worker is inside.

        Guidelines:
            - Use in tests only.
        """
        everyone.wait()
        return label

    together = [meet_all.invoke({"label": n}) for n in range(capacity)]
    assert await asyncio.gather(*together) == list(range(capacity))
