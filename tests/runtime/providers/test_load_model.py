"""load_model: from a ZETT_MODEL spec to a model object."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zett_agent.providers import load_model
from zett_agent.providers.anthropic import AnthropicModel
from zett_agent.providers.demo import DemoModel
from zett_agent.providers.openai import OpenAIModel
from zett_agent.testing import ScriptedModel

from .fake_server import FakeServer, Reply
from .openai_chunks import text_stream
from .support import collect


@pytest.fixture
def custom_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A throwaway module of model objects and factories, importable for this test only."""
    name = f"custom_models_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from zett_agent.testing import ScriptedModel

            READY = ScriptedModel()

            def build():
                return ScriptedModel()

            def build_text():
                return "not a model"

            NUMBER = 42

            class Holder:
                model = READY
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_demo_builds_the_offline_model() -> None:
    model = load_model("demo")

    assert isinstance(model, DemoModel)
    assert model.pace == 0.0


def test_demo_pace_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZETT_DEMO_PACE", "0.25")

    assert load_model(" demo ").pace == 0.25


def test_a_demo_pace_that_is_not_a_number_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZETT_DEMO_PACE", "fast")

    with pytest.raises(ValueError, match="ZETT_DEMO_PACE must be a number of seconds, got 'fast'"):
        load_model("demo")


def test_openai_spec_builds_an_openai_model_for_the_official_api() -> None:
    model = load_model("openai:gpt-4o-mini")

    assert isinstance(model, OpenAIModel)
    assert (model.model, model.base_url) == ("gpt-4o-mini", None)


def test_openai_spec_uses_the_compatible_server_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ZETT_OPENAI_BASE_URL", "http://localhost:11434/v1")

    model = load_model("openai:llama3.2")

    assert isinstance(model, OpenAIModel)
    assert (model.model, model.base_url) == ("llama3.2", "http://localhost:11434/v1")


@pytest.mark.parametrize(("key", "sent"), [(None, "unused"), ("sk-local", "sk-local")])
async def test_openai_compatible_spec_streams_from_the_server_at_the_base_url(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch, key: str | None, sent: str
) -> None:
    monkeypatch.setenv("ZETT_OPENAI_BASE_URL", f"{server.url}/v1")
    if key is not None:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    server.reply(Reply.stream(text_stream("Hello from the local server")))

    model = load_model("openai-compatible:llama3.2")
    try:
        events = await collect(model)
    finally:
        await model.aclose()

    assert isinstance(model, OpenAIModel)
    assert "".join(event.delta for event in events if event.delta) == (
        "Hello from the local server"
    )
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.json()["model"] == "llama3.2"
    assert request.headers["authorization"] == f"Bearer {sent}"


def test_openai_compatible_spec_needs_the_base_url() -> None:
    with pytest.raises(ValueError, match="needs ZETT_OPENAI_BASE_URL"):
        load_model("openai-compatible:llama3.2")


def test_anthropic_spec_builds_an_anthropic_model() -> None:
    model = load_model("anthropic:claude-sonnet-4-5")

    assert isinstance(model, AnthropicModel)
    assert model.model == "claude-sonnet-4-5"


@pytest.mark.parametrize("spec", ["openai:", "anthropic:  "])
def test_a_provider_spec_without_a_model_name_is_rejected(spec: str) -> None:
    with pytest.raises(ValueError, match="names no model"):
        load_model(spec)


@pytest.mark.parametrize("spec", ["", "   ", "gpt-4o", "demo:fast", ":model"])
def test_an_unknown_spec_is_rejected_with_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ValueError, match=r"'demo', 'openai:<model>', 'openai-compatible:<model>'"):
        load_model(spec)


def test_an_import_string_may_name_a_model_object(custom_models: str) -> None:
    model = load_model(f"{custom_models}:READY")

    assert isinstance(model, ScriptedModel)
    assert model is load_model(f"{custom_models}:Holder.model")


def test_an_import_string_may_name_a_factory_or_a_class(custom_models: str) -> None:
    assert isinstance(load_model(f"{custom_models}:build"), ScriptedModel)
    assert isinstance(load_model("zett_agent.testing:ScriptedModel"), ScriptedModel)


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("NUMBER", "resolved to int, which is not a model"),
        ("build_text", "resolved to str, which is not a model"),
        ("missing", "has no attribute 'missing'"),
    ],
)
def test_an_import_string_that_yields_no_model_is_rejected(
    custom_models: str, attribute: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_model(f"{custom_models}:{attribute}")


def test_an_import_string_naming_a_missing_module_is_rejected() -> None:
    with pytest.raises(ValueError, match="cannot import 'no_such_module_here'"):
        load_model("no_such_module_here:model")


def test_building_provider_models_imports_no_sdk() -> None:
    """The SDKs load on the first request, so the runtime and the demo never need them."""
    probe = (
        "import sys\n"
        "from zett_agent.providers import load_model\n"
        "load_model('openai:gpt-4o-mini'); load_model('anthropic:claude-sonnet-4-5')\n"
        "print(sorted(name for name in ('openai', 'anthropic') if name in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )

    assert result.stdout.strip() == "[]"
