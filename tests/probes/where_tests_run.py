"""Notes each test's worker, id and group into ``$ZETT_PROBE_DIR/<worker>.jsonl`` and skips it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def pytest_runtest_setup(item: pytest.Item) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    grouped = any(True for _ in item.iter_markers("xdist_group"))
    with (Path(os.environ["ZETT_PROBE_DIR"]) / f"{worker}.jsonl").open("a") as notes:
        notes.write(json.dumps({"worker": worker, "nodeid": item.nodeid, "grouped": grouped}))
        notes.write("\n")
    pytest.skip("probe: only where the test runs is noted")
