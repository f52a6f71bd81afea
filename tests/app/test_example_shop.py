"""The example project (examples/shop/) passes its own tests against zett installed as a
package: a wheel built from this checkout, installed into a fresh virtualenv, with the
checkout nowhere on ``sys.path`` (the shop's conftest checks that ``agent_app`` and
``zett_agent`` come from site-packages).

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


def test_the_example_shop_passes_its_tests_on_zett_installed_from_a_wheel(tmp_path):
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
    environment["SHOP_REQUIRE_INSTALLED"] = "1"
    environment["SHOP_DATABASE"] = str(tmp_path / "shop.sqlite3")
    done = subprocess.run(
        [python, "-m", "pytest", "-q"],
        cwd=SHOP,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
