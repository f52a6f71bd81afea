"""``override_assistant``: what it replaces, what it keeps, and that the registered
assistant is put back — as a context manager and as a decorator."""

from __future__ import annotations

import unittest

import pytest

from agent_app.assistants import UnknownAssistant, registry
from agent_app.testing import ScriptModel, override_assistant, text
from tests.app.kit.assistants import Desk, stock


def test_it_replaces_the_parts_given_and_keeps_the_rest(desk):
    original = registry.get("kit-desk")
    model = ScriptModel([text("hi")])
    with override_assistant(
        "kit-desk", model=model, tools=[stock], instructions="Only count."
    ) as overridden:
        assert registry.get("kit-desk") is overridden is not original
        assert isinstance(overridden, Desk)
        assert overridden.get_model() is model
        assert [t.name for t in overridden.get_tools()] == ["stock"]
        assert overridden.get_instructions(None) == "Only count."
        assert overridden.approval_required == {"refund"} and overridden.name == "Desk"
        assert registry.ids().index("kit-desk") == 1  # its place among the assistants
    assert registry.get("kit-desk") is original


def test_an_assistant_that_computes_its_parts_is_overridden_all_the_same(desk):
    class Computed(Desk):
        def get_instructions(self, chat):
            return "computed"

        def get_tools(self):
            return []

    registry.swap("kit-desk", Computed())
    with override_assistant("kit-desk", tools=[stock], instructions="given") as overridden:
        assert overridden.get_instructions(None) == "given"
        assert [t.name for t in overridden.get_tools()] == ["stock"]
    assert registry.get("kit-desk").get_instructions(None) == "computed"


def test_a_model_spec_is_resolved_like_the_setting(desk):
    with override_assistant("kit-desk", model="demo") as overridden:
        assert type(overridden.get_model()).__name__ == "DemoModel"


def test_overrides_nest_and_unwind_in_order(desk):
    original = registry.get("kit-desk")
    with override_assistant("kit-desk", instructions="outer"):
        with override_assistant("kit-desk", tools=[]) as inner:
            assert inner.get_instructions(None) == "outer" and inner.get_tools() == []
        assert registry.get("kit-desk").get_instructions(None) == "outer"
    assert registry.get("kit-desk") is original


def test_it_is_restored_when_the_block_raises(desk):
    original = registry.get("kit-desk")
    with pytest.raises(RuntimeError), override_assistant("kit-desk", instructions="x"):
        raise RuntimeError
    assert registry.get("kit-desk") is original


def test_an_unknown_id_and_bad_parts_are_refused(desk):
    with pytest.raises(UnknownAssistant, match="nobody"), override_assistant("nobody"):
        pass
    with pytest.raises(TypeError, match="instructions"):
        override_assistant("kit-desk", instructions=3)
    with pytest.raises(TypeError, match="tools"):
        override_assistant("kit-desk", tools=stock)
    with pytest.raises(TypeError, match="TestCase"):
        override_assistant("kit-desk")(type("Plain", (), {}))


@override_assistant("kit-desk", instructions="decorated")
def test_as_a_decorator_of_a_test_function(desk):
    assert registry.get("kit-desk").get_instructions(None) == "decorated"


@override_assistant("kit-desk", instructions="decorated async")
async def test_as_a_decorator_of_an_async_test_function(desk):
    assert registry.get("kit-desk").get_instructions(None) == "decorated async"


def test_a_decorated_function_restores_after_each_call(desk):
    original = registry.get("kit-desk")

    @override_assistant("kit-desk", instructions="inside")
    def inside():
        return registry.get("kit-desk").get_instructions(None)

    assert inside() == "inside" and inside() == "inside"
    assert registry.get("kit-desk") is original


def test_as_a_decorator_of_a_test_case_class(desk):
    seen = []

    @override_assistant("kit-desk", instructions="for the class")
    class Decorated(unittest.TestCase):
        def setUp(self):
            seen.append(("setUp", registry.get("kit-desk").get_instructions(None)))

        def test_one(self):
            seen.append(("test", registry.get("kit-desk").get_instructions(None)))

    original = registry.get("kit-desk")
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(Decorated).run(result)
    assert result.wasSuccessful()
    assert seen == [("setUp", "for the class"), ("test", "for the class")]
    assert registry.get("kit-desk") is original
