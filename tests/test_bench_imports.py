"""The benchmarks run in their own virtualenv (``bench/requirements.txt``), without pytest.

They share the tests' daphne launcher (``tests.app.servers``), so nothing that launcher
imports may need pytest; ``.ci/run``'s benchmark smoke runs would fail only after the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_graph import cycles_of

ROOT = Path(__file__).resolve().parent.parent
#: Not imported on their own: the ASGI app a benchmark's daphne serves (it reads its frames
#: from the environment at import).
SERVED = {"__init__", "bare_channels"}
BENCHMARKS = sorted(
    f"bench.{path.stem}" for path in (ROOT / "bench").glob("*.py") if path.stem not in SERVED
)


@pytest.mark.parametrize("module", BENCHMARKS)
def test_a_benchmark_imports_without_pytest(module: str) -> None:
    # A None entry in sys.modules makes any import of pytest fail, as in bench/.venv.
    code = f"import sys; sys.modules['pytest'] = None; import {module}"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_the_benchmarks_import_each_other_without_a_cycle():
    assert cycles_of("bench") == []
