"""The demo tools: exact arithmetic, the current time, notes (zett_site.tools)."""

from __future__ import annotations

from datetime import datetime, timedelta
from fractions import Fraction

import pytest

from agent_app.models import ChatSession
from tests.app.llm_doubles import call_tool, say
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.testing import ScriptedModel
from zett_site.models import Note
from zett_site.tools import (
    MAX_EXPRESSION_LENGTH,
    TOOLS_NEEDING_APPROVAL,
    CalculationError,
    calculate,
    current_time,
    demo_tools,
    evaluate,
    format_number,
    save_note,
)


@pytest.mark.parametrize(
    ("expression", "shown"),
    [
        ("1 + 2 * 3", "7"),
        ("(1 + 2) * 3", "9"),
        ("0.1 + 0.2", "0.3"),
        ("10 / 4", "2.5"),
        ("-10 / 4", "-2.5"),
        ("7 // 2", "3"),
        ("-7 % 3", "2"),
        ("2 ** 100", "1267650600228229401496703205376"),
        ("2 ** -2", "0.25"),
        ("1/3 + 1/6", "0.5"),
        ("+5 - -5", "10"),
    ],
)
async def test_calculate_is_exact(expression, shown):
    assert await calculate.invoke({"expression": expression}) == shown


def test_a_fraction_without_a_finite_decimal_shows_both_forms():
    assert format_number(Fraction(1, 3)) == "1/3 (≈ 0.333333333333333333333333333333)"
    assert format_number(Fraction(-2, 3)).startswith("-2/3 (≈ -0.666")


def test_a_long_terminating_decimal_is_shown_exactly():
    value = evaluate("1 / 2**70")
    shown = format_number(value)
    assert shown.startswith("0.000000000000000000000847") and "e" not in shown.lower()
    assert Fraction(shown) == value


def test_the_largest_allowed_results_can_still_be_shown():
    assert len(format_number(evaluate("9 ** 4000"))) > 3800
    assert format_number(evaluate("1 / 2 ** 6000 / 2 ** 6000")).startswith("1/")


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("1 / 0", "Division by zero"),
        ("5 % 0", "Division by zero"),
        ("0 ** -1", "Division by zero"),
        ("2 ^ 3", "write 2\\*\\*10"),
        ("2 ** 0.5", "whole-number exponents"),
        ("10 ** 100000", "larger than"),
        ("__import__('os').system('true')", "Only numbers"),
        ("abs(-1)", "Only numbers"),
        ("x + 1", "Only numbers"),
        ("'a' * 3", "Only numbers"),
        ("True + 1", "Only numbers"),
        ("1 +", "Not an arithmetic expression"),
        ("1 << 2", "Unsupported operator"),
        ("9 ** 9000 * 9 ** 9000", "more than"),
    ],
)
def test_anything_but_plain_arithmetic_is_refused_with_a_reason(expression, problem):
    with pytest.raises(CalculationError, match=problem):
        evaluate(expression)


def test_an_overlong_expression_is_refused_before_parsing():
    with pytest.raises(CalculationError, match="limit"):
        evaluate("1+" * MAX_EXPRESSION_LENGTH + "1")


async def test_the_calculator_refuses_invalid_arguments_through_its_schema():
    with pytest.raises(ValueError, match="expression"):
        await calculate.invoke({"expression": ""})


async def test_current_time_defaults_to_utc():
    shown = await current_time.invoke({})
    stamp = datetime.fromisoformat(shown.split(" ")[0])
    assert stamp.utcoffset() == timedelta(0)
    assert "(UTC," in shown


async def test_current_time_uses_the_named_zone():
    shown = await current_time.invoke({"timezone": "Asia/Tokyo"})
    assert datetime.fromisoformat(shown.split(" ")[0]).utcoffset() == timedelta(hours=9)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "CET+5"])
async def test_an_unknown_zone_is_a_clear_error(zone):
    with pytest.raises(ValueError, match="IANA"):
        await current_time.invoke({"timezone": zone})


@pytest.mark.django_db(transaction=True)
async def test_save_note_writes_a_note_of_the_session_whose_run_calls_it():
    first, second = await ChatSession.objects.acreate(), await ChatSession.objects.acreate()
    model = ScriptedModel(
        [
            call_tool("save_note", title=" Groceries ", text="Milk"),
            say("Saved."),
            call_tool("save_note", title="Tickets", text="Rome"),
            say("Saved."),
        ]
    )
    agent = await Agent.create(model, tools=[save_note], extensions=[])
    for session in (first, second):
        await agent.run("note it", config=AgentRunConfig(str(session.pk)))
    notes = [(n.title, n.text, n.session_id) async for n in Note.objects.order_by("pk")]
    assert notes == [("Groceries", "Milk", first.pk), ("Tickets", "Rome", second.pk)]
    result = model.requests[1].messages[-1].content
    assert result == f"Saved note #{(await Note.objects.order_by('pk').afirst()).pk}: Groceries"


async def test_save_note_rejects_a_blank_title():
    with pytest.raises(ValueError, match="title"):
        await save_note.invoke({"title": "   ", "text": "x"})


def test_every_demo_tool_is_documented_for_the_model_and_only_save_note_needs_approval():
    tools = demo_tools()
    assert [t.name for t in tools] == ["calculate", "current_time", "save_note"]
    assert all(t.description and t.guidelines and t.snippet for t in tools)
    assert {"save_note"} == TOOLS_NEEDING_APPROVAL
    assert all(a is b for a, b in zip(tools, demo_tools(), strict=True)), "shared, not rebuilt"
