"""The ``redis`` group really runs on one worker: a child run of the process tests in two
workers, with every test skipped at setup by a probe plugin that notes where it ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)
def test_the_redis_group_runs_on_one_worker(tmp_path):
    environment = {**os.environ, "ZETT_PROBE_DIR": str(tmp_path)}
    environment.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/app/processes", "-n", "2", "-q",
         "-p", "tests.probes.where_tests_run", "-p", "no:cacheprovider"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = [json.loads(line) for path in tmp_path.glob("*.jsonl") for line in path.open()]
    workers_of_group = {entry["worker"] for entry in ran if entry["grouped"]}
    assert len({entry["worker"] for entry in ran}) == 2, ran
    assert len(workers_of_group) == 1, ran
    assert all(entry["nodeid"].endswith("@redis") for entry in ran if entry["grouped"])


def test_a_module_that_imports_the_redis_url_inside_a_function_joins_the_group(tmp_path):
    """Such an import leaves no name on the module: the group is found from its source."""
    from tests.parallel import _imports_a_way_in

    inside = tmp_path / "inside.py"
    inside.write_text(
        "def test_x():\n    from tests.app.services import REDIS_URL\n    return REDIS_URL\n"
    )
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("import os\n\ndef test_y():\n    return os.environ.get('REDIS_URL')\n")
    assert _imports_a_way_in(str(inside))
    assert not _imports_a_way_in(str(elsewhere))
