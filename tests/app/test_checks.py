"""System checks: a misconfigured deployment says so before anyone chats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_app.checks import check_model, check_reply_timeout

ROOT = Path(__file__).resolve().parents[2]


def manage_check(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in {"ZETT_MODEL", "DATABASE_URL"}}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_manage_check_fails_on_an_unknown_model_and_says_why():
    result = manage_check(ZETT_MODEL="nonsense")
    assert result.returncode != 0
    assert "zett.E010" in result.stderr and "'nonsense'" in result.stderr


def test_the_default_demo_model_passes(settings):
    settings.ZETT_MODEL = "demo"
    assert check_model() == []


def test_an_import_string_that_does_not_import_is_an_error(settings):
    settings.ZETT_MODEL = "no_such_package.models:factory"
    (error,) = check_model()
    assert error.id == "zett.E010" and "no_such_package" in error.msg


def test_a_provider_without_its_key_is_a_warning_naming_the_variable(settings, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.ZETT_MODEL = "anthropic:claude-sonnet-4-5"
    (warning,) = check_model()
    assert warning.id == "zett.W010" and "ANTHROPIC_API_KEY" in warning.msg


def test_a_negative_reply_timeout_is_an_error(settings):
    settings.ZETT_REPLY_TIMEOUT = -1
    (error,) = check_reply_timeout()
    assert error.id == "zett.E012"
