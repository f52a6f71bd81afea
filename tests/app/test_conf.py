"""agent_app.conf: one default per ZETT_* setting, the README's numbers, read through
Django settings at each access (ZETT_OPENAI_BASE_URL with the environment as fallback)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agent_app import conf
from agent_app.assistants.llm import resolve_model

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_defaults_are_the_readmes():
    rows = re.findall(r"^\| `(ZETT_[A-Z_]+)` \| `([0-9.]+)` \|", README, re.M)
    assert len(rows) >= 6
    for name, value in rows:
        if name == "ZETT_DB_POOL_SIZE":  # the example site's database pool, not the app's
            continue
        default = conf.DEFAULTS[name]
        assert float(default) == float(value), f"{name}: README says {value}, conf {default}"
    assert conf.DEFAULTS["ZETT_REPLY_TIMEOUT"] == 3600
    assert conf.DEFAULTS["ZETT_GRACEFUL_SHUTDOWN"] is True


def documented_defaults() -> dict[str, object]:
    """The README's table of Django settings: name → default (a Python literal)."""
    section = README.split("**Django settings**", 1)[1].split("\n\n**", 1)[0]
    rows = re.findall(r"^\| `(ZETT_[A-Z_]+)` \| `([^`]*)` \|", section, re.M)
    return {name: ast.literal_eval(value) for name, value in rows}


def test_every_setting_is_in_the_readmes_table_with_its_default():
    documented = documented_defaults()
    assert sorted(documented) == sorted(conf.DEFAULTS), "the README table and conf differ"
    for name, default in conf.DEFAULTS.items():
        assert documented[name] == default, f"{name}: README {documented[name]!r}, conf {default!r}"
        assert type(documented[name]) is type(default), f"{name}: {documented[name]!r}"


def test_a_project_setting_wins_and_an_unknown_name_is_an_error(settings):
    settings.ZETT_HISTORY_PAGE = 7
    assert conf.ZETT_HISTORY_PAGE == 7
    del settings.ZETT_HISTORY_PAGE
    assert conf.ZETT_HISTORY_PAGE == 50
    with pytest.raises(AttributeError):
        conf.setting("ZETT_NO_SUCH_THING")


def test_the_openai_base_url_comes_from_settings_then_the_environment(settings, monkeypatch):
    monkeypatch.delenv("ZETT_OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings.ZETT_OPENAI_BASE_URL = "http://127.0.0.1:11434/v1"
    model = resolve_model("openai-compatible:llama3.2")
    assert model.base_url == "http://127.0.0.1:11434/v1"
    del settings.ZETT_OPENAI_BASE_URL
    monkeypatch.setenv("ZETT_OPENAI_BASE_URL", "http://10.0.0.2:8000/v1")
    assert conf.ZETT_OPENAI_BASE_URL == "http://10.0.0.2:8000/v1"
    monkeypatch.delenv("ZETT_OPENAI_BASE_URL")
    with pytest.raises(Exception, match="ZETT_OPENAI_BASE_URL"):
        resolve_model("openai-compatible:llama3.2")
