"""The example project (examples/shop/) passes its own tests against zett installed as a
package: a wheel built from this checkout, installed into a fresh virtualenv, with the
checkout nowhere on ``sys.path`` (the shop's conftest checks that ``agent_app`` and
``zett_agent`` come from site-packages, and that zett's pytest plugin was loaded by its
entry point). So does a fresh ``startproject`` whose test module uses the testing kit's
fixtures with no conftest of its own.

Slow (a build and an install; dependencies come from the package index at the versions
requirements*.txt pin): ``pytest -m slow`` runs it alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "shop"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _run(command: list[str], **options) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, **options)
    assert done.returncode == 0, f"{command}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def _constraints(tmp_path: Path) -> Path:
    """requirements.txt and requirements-dev.txt as one constraints file (pins only)."""
    pins = []
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                pins.append(line.split("[")[0] + line[line.index("=") :] if "[" in line else line)
    path = tmp_path / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


#: What the distribution is built from (pyproject's packages, its readme).
SOURCES = ("pyproject.toml", "README.md", "zett_agent", "agent_app")
#: What a build in the checkout itself would leave there.
BUILD_LEFTOVERS = ("build", "zett.egg-info", "dist")


def _source_copy(tmp_path: Path) -> Path:
    """The distribution's sources, copied: setuptools writes ``build/`` and
    ``zett.egg-info/`` next to the sources it builds, so the checkout is never built in."""
    copy = tmp_path / "source"
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            copy.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """``(python, environment)`` of a fresh virtualenv with zett installed from a wheel of
    this checkout, and the test tools; the environment holds nothing of this suite."""
    tmp_path = tmp_path_factory.mktemp("installed")
    before = {name for name in BUILD_LEFTOVERS if (ROOT / name).exists()}
    dist = tmp_path / "dist"
    source = _source_copy(tmp_path)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)])
    (wheel,) = dist.glob("zett-*.whl")
    assert {name for name in BUILD_LEFTOVERS if (ROOT / name).exists()} == before
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    test_tools = ["pytest", "pytest-django", "pytest-asyncio", "pytest-timeout", "websockets"]
    _run(
        [python, "-m", "pip", "install", "-q", "-c", str(_constraints(tmp_path)),
         f"{wheel}[redis]", *test_tools]
    )  # fmt: skip
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV")
        and not key.startswith("ZETT_")
    }
    return python, environment


def _pytest(python: str, cwd: Path, environment: dict[str, str]) -> str:
    done = subprocess.run(
        [python, "-m", "pytest", "-q"],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
    return done.stdout


def test_the_example_shop_passes_its_tests_on_zett_installed_from_a_wheel(installed, tmp_path):
    python, environment = installed
    environment = environment | {
        "SHOP_REQUIRE_INSTALLED": "1",
        "SHOP_DATABASE": str(tmp_path / "shop.sqlite3"),
    }
    _pytest(python, SHOP, environment)


def test_a_fresh_project_tests_its_assistant_with_the_kit_and_no_conftest(installed, tmp_path):
    """``django-admin startproject``, zett added as docs/embedding.md says, one assistant,
    and a test module using the plugin's fixtures: found by its entry point, no conftest."""
    python, environment = installed
    project = tmp_path / "fresh"
    project.mkdir()
    _run([python, "-m", "django", "startproject", "fresh", "."], cwd=project, env=environment)
    _run([python, "manage.py", "startapp", "desk"], cwd=project, env=environment)
    for name, text in FRESH_PROJECT.items():
        path = project / name
        path.parent.mkdir(exist_ok=True)
        mode = "a" if name == "fresh/settings.py" else "w"
        with path.open(mode) as file:
            file.write(text)
    assert not list(project.rglob("conftest.py"))
    output = _pytest(python, project, environment | {"OPENAI_API_KEY": "sk-not-used"})
    assert "4 passed" in output


FRESH_PROJECT = {
    "fresh/settings.py": """
INSTALLED_APPS = ["daphne", *INSTALLED_APPS, "channels", "agent_app", "desk"]
ASGI_APPLICATION = "fresh.asgi.application"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
ZETT_MODEL = "openai:gpt-4o-mini"
""",
    "fresh/asgi.py": """
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fresh.settings")
http = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from agent_app.asgi import websocket_application  # noqa: E402

application = ProtocolTypeRouter({"http": http, "websocket": websocket_application()})
""",
    "desk/assistants.py": """
from agent_app.assistants import Assistant, current_user, register
from zett_agent.tools.base import tool

REFUNDED = []


@tool
async def refund_order(number: int) -> str:
    \"\"\"Refund an order.

    Args:
        number: The order number.

    Guidelines:
        - The customer approves each refund.
    \"\"\"
    REFUNDED.append((number, str(current_user())))
    return f"Refunded order {number}."


@register
class Support(Assistant):
    id = "support"
    instructions = "You help customers."
    tools = [refund_order]
    approval_required = {"refund_order"}
""",
    "pytest.ini": """
[pytest]
DJANGO_SETTINGS_MODULE = fresh.settings
python_files = tests.py test_*.py
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
""",
    "desk/tests.py": """
import pytest

from agent_app.testing import ModelRequestsBlocked, call, override_assistant, text
from desk.assistants import REFUNDED

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_refund_waits_for_approval(script_model, zett_chat, django_user_model):
    REFUNDED.clear()
    alice = await django_user_model.objects.acreate(username="alice")
    script_model([call("refund_order", number=7), text("Refunded.")], assistant="support")
    chat = await zett_chat(user=alice, assistant="support")
    await chat.send("Please refund order 7")
    assert chat.pending[0]["tool"] == "refund_order" and REFUNDED == []
    await chat.approve()
    assert chat.answer_text == "Refunded." and REFUNDED == [(7, "alice")]


async def test_a_denied_refund_never_runs(script_model, zett_chat):
    REFUNDED.clear()
    script_model([call("refund_order", number=8), text("Not refunded.")])
    chat = await zett_chat()
    await chat.send("Refund order 8")
    await chat.deny()
    assert chat.answer_text == "Not refunded." and REFUNDED == []


async def test_the_configured_real_model_is_blocked(zett_chat):
    chat = await zett_chat(assistant="support")
    with pytest.raises(ModelRequestsBlocked):
        await chat.send("Hello")


async def test_the_offline_model_calls_the_tool_by_name(zett_chat, settings):
    settings.ZETT_DEMO_PACE = 0
    REFUNDED.clear()
    with override_assistant("support", model="demo"):
        chat = await zett_chat(assistant="support")
        await chat.send("refund order 9")
        await chat.approve()
    assert chat.answer_text == "The refund_order tool returned: Refunded order 9."
    assert REFUNDED == [(9, "AnonymousUser")]
""",
}
