"""The agent factory (agent_app.agents.factory): model resolution from settings, agent assembly."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from agent_app.agents.approval import ConfirmationExtension
from agent_app.agents.factory import build_agent
from agent_app.assistants.llm import resolve_model
from agent_app.durable.persistence import OrmPersistenceExtension
from tests.app.llm_doubles import SEAM
from zett_agent.extensions.ask_user import AskUserExtension
from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
from zett_agent.providers.demo import DemoModel
from zett_agent.testing import ScriptedModel

#: A model object itself (not a factory) is accepted as ``package.module:attribute`` too.
MODEL_OBJECT = ScriptedModel()


def test_demo_is_the_default_and_paced_from_settings(settings):
    settings.ZETT_MODEL = "demo"
    settings.ZETT_DEMO_PACE = 0.25
    model = resolve_model()
    assert isinstance(model, DemoModel) and model.pace == 0.25


def test_an_import_string_naming_a_factory_is_called(settings):
    scripted = ScriptedModel()
    settings.ZETT_MODEL = SEAM
    settings.ZETT_TEST_MODEL = scripted
    assert resolve_model() is scripted


def test_an_import_string_naming_a_model_object_is_used_as_is():
    assert resolve_model(f"{__name__}:MODEL_OBJECT") is MODEL_OBJECT


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("no_such_module_zett:factory", "cannot import"),
        ("tests.app.llm_doubles:missing", "has no attribute"),
        ("tests.app.llm_doubles:SEAM", "not a model"),
        ("gpt-4o", "Unknown model spec"),
        ("openai:", "names no model"),
    ],
)
def test_a_bad_spec_is_improperly_configured_with_the_reason(spec, problem):
    with pytest.raises(ImproperlyConfigured, match=problem) as caught:
        resolve_model(spec)
    assert spec in str(caught.value)


@pytest.mark.django_db(transaction=True)
async def test_each_session_agent_has_the_tools_and_extensions_of_the_app():
    agent = await build_agent("9d6f1c1e-0000-4000-8000-000000000001", ScriptedModel())
    assert set(agent.tools) >= {"calculate", "current_time", "save_note"}
    kinds = [type(e) for e in agent.extensions]
    assert any(isinstance(e, AskUserExtension) for e in agent.extensions)
    for expected in (
        OrmPersistenceExtension,
        ConfirmationExtension,
        ToolGuidelinesExtension,
    ):
        assert expected in kinds
    gate = next(e for e in agent.extensions if isinstance(e, ConfirmationExtension))
    assert gate.tools_needing_approval == {"save_note"}


@pytest.mark.django_db(transaction=True)
async def test_sessions_share_tools_and_extensions_but_each_keeps_its_own_persistence():
    first = await build_agent("9d6f1c1e-0000-4000-8000-000000000002", ScriptedModel())
    second = await build_agent("9d6f1c1e-0000-4000-8000-000000000003", ScriptedModel())
    assert all(first.tools[name] is second.tools[name] for name in first.tools)
    for kind in (AskUserExtension, ConfirmationExtension, ToolGuidelinesExtension):
        mine, theirs = ([e for e in a.extensions if isinstance(e, kind)] for a in (first, second))
        assert mine == theirs and mine[0] is theirs[0]
    (mine,), (theirs,) = (
        [e for e in a.extensions if isinstance(e, OrmPersistenceExtension)] for a in (first, second)
    )
    assert mine is not theirs
