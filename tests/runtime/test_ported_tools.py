"""``@tool`` behaves as the upstream library documents it (docs/runtime.md, Tools).

Every parameter must be annotated and named; ``Args:`` may only describe real parameters;
an ``AgentTool`` can be awaited like the function it wraps; results serialise the same way;
the rendered guidance puts each snippet in a bullet of its own.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

import pydantic
import pytest

from zett_agent.tools.base import AgentTool, render_tool_guidance, tool


class Item(pydantic.BaseModel):
    amount: int = pydantic.Field(gt=0)


@tool(guidelines="Use to add up an order.")
def total(items: list[Item]) -> int:
    """Sum the item amounts."""
    return sum(item.amount for item in items)


def test_an_unannotated_parameter_is_refused_by_name():
    with pytest.raises(ValueError, match="Missing annotation for value"):

        @tool
        def echo(value):
            """Echo a value.

            Guidelines:
                - Use to echo.
            """
            return value


def test_only_named_parameters_are_accepted():
    with pytest.raises(ValueError, match="named parameters"):

        @tool(guidelines="Use to add.")
        def add_all(*values: int) -> int:
            """Add values."""
            return sum(values)

    with pytest.raises(ValueError, match="named parameters"):

        @tool(guidelines="Use to add.")
        def add_pair(a: int, /, b: int) -> int:
            """Add two values."""
            return a + b


def test_args_may_only_describe_parameters_that_exist():
    with pytest.raises(ValueError, match="unknown parameters: missing"):

        @tool(guidelines="Use to echo.")
        def echo(value: str) -> str:
            """Echo a value.

            Args:
                missing: Not a parameter of this function.
            """
            return value


def test_description_and_guideline_errors_read_as_upstream_s():
    with pytest.raises(ValueError, match="docstring description"):

        @tool(guidelines="Use to echo.")
        def silent(value: int) -> int:
            return value

    with pytest.raises(ValueError, match="at least one non-empty guideline"):

        @tool
        def unguided(value: int) -> int:
            """Return a value."""
            return value


async def test_an_agent_tool_is_awaitable_like_the_function_it_wraps():
    assert await total({"items": [{"amount": 2}, {"amount": 3}]}) == 5  # the raw value
    with pytest.raises(pydantic.ValidationError):
        await total({"items": [{"amount": -1}]})
    with pytest.raises(pydantic.ValidationError):
        await total({"items": [], "unexpected": True})


async def test_a_hand_built_tool_is_awaitable_too():
    async def shout(text: str) -> str:
        return text.upper()

    built = AgentTool("shout", "Shout a text.", {"type": "object"}, shout, ("Use to shout.",))
    assert await built({"text": "hi"}) == "HI"


def test_serialize_result_keeps_text_and_writes_json_otherwise():
    assert total.serialize_result("plain text") == "plain text"
    assert total.serialize_result(Item(amount=2)) == '{"amount": 2}'
    assert total.serialize_result({"city": "Zürich"}) == '{"city": "Zürich"}'


def test_guidance_puts_one_snippet_bullet_per_tool_then_the_rules():
    @tool
    def inspect_value(value: int) -> int:
        """Inspect one value.

        Snippet:
            inspect_value(value=1)

        Guidelines:
            - Inspect first.
            - Then report.
        """
        return value

    assert render_tool_guidance([]) == ""
    assert render_tool_guidance([inspect_value]) == (
        "# Tool snippets\n"
        "- inspect_value: inspect_value(value=1)\n\n"
        "# Tool guidelines\n"
        "## inspect_value\n"
        "- Inspect first.\n"
        "- Then report."
    )


def test_a_multi_line_snippet_stays_indented_inside_its_bullet():
    @tool
    def create_card(title: str) -> str:
        """Create one card.

        Snippet:
            create_card(title="One")
            create_card(title="Two")

        Guidelines:
            - Create only when useful.
        """
        return title

    assert (
        '- create_card:\n  create_card(title="One")\n  create_card(title="Two")'
        in render_tool_guidance([create_card])
    )


class Line(pydantic.BaseModel):
    amount: int = pydantic.Field(gt=0)


class Order(pydantic.BaseModel):
    lines: list[Line]


class Node(pydantic.BaseModel):
    label: str = "node"
    children: list[Node] = []


def test_nested_models_become_a_self_contained_schema():
    @tool(guidelines="Use to add up an order.")
    def order_total(order: Order) -> int:
        """Sum an order's amounts.

        Args:
            order: The order to add up.
        """
        return sum(line.amount for line in order.lines)

    schema = order_total.parameters
    assert "$defs" not in schema and "$ref" not in json.dumps(schema)
    order = schema["properties"]["order"]
    assert order["title"] == "Order" and order["description"] == "The order to add up."
    assert order["properties"]["lines"]["items"]["properties"]["amount"]["exclusiveMinimum"] == 0


def test_a_recursive_model_is_refused():
    with pytest.raises(ValueError, match="recursive model"):

        @tool(guidelines="Use to walk a tree.")
        def walk(tree: Node) -> int:
            """Count a tree's nodes."""
            return 0


class Card(pydantic.BaseModel):
    kind: Literal["card"] = "card"
    last_digits: str


class Transfer(pydantic.BaseModel):
    kind: Literal["transfer"] = "transfer"
    iban: str


def test_a_discriminated_union_keeps_no_reference_to_the_removed_definitions():
    @tool(guidelines="Use to pay.")
    def pay(method: Annotated[Card | Transfer, pydantic.Field(discriminator="kind")]) -> str:
        """Pay with a card or a transfer.

        Args:
            method: How to pay.
        """
        return method.kind

    schema = pay.parameters
    text = json.dumps(schema)
    assert "$defs" not in text and "$ref" not in text
    assert "discriminator" not in schema["properties"]["method"]
    members = schema["properties"]["method"]["oneOf"]
    assert [member["properties"]["kind"]["const"] for member in members] == ["card", "transfer"]


def test_a_parameter_named_discriminator_is_kept():
    @tool(guidelines="Use to sort.")
    def sort_by(discriminator: str, order: Order) -> str:
        """Sort by a field.

        Args:
            discriminator: The field to sort by.
            order: The order to sort.
        """
        return discriminator

    assert "discriminator" in sort_by.parameters["properties"]


def test_property_titles_are_kept_as_pydantic_writes_them():
    @tool(guidelines="Use to add.")
    def add_up(first_number: int, order: Order) -> int:
        """Add.

        Args:
            first_number: The first one.
            order: The order.
        """
        return first_number

    properties = add_up.parameters["properties"]
    assert properties["first_number"]["title"] == "First Number"
    assert properties["order"]["title"] == "Order"
    assert "title" not in add_up.parameters
