"""The suite in parallel worker processes (pytest-xdist), and what the workers must not share.

``pyproject.toml`` asks for ``-n auto --dist loadgroup``. ``auto`` means one worker a CPU
(at most ``MAX_WORKERS``) for a run of folders or of the whole suite, and no worker at all
(the tests run in the pytest process, output live) when every argument names a file or a
test, or output capture is off (``-s``): a single file's run would mostly wait for its
workers to start. ``-n 0`` runs anything in one process; ``-n 2`` forces two workers.

Each worker is a separate process with its own in-memory SQLite test database (pytest-django
names PostgreSQL ones per worker), its own daphne servers and Chromium, and its own artifact
folder (``tests/app/servers.ARTIFACTS``). What the workers would share is the Redis database
of ``ZETT_TEST_REDIS_URL``: some tests flush it, others count frame budgets or hold run
leases in it. So every test of a module that imports ``tests.app.services.REDIS_URL`` or
``tests.app.servers.two_workers`` (a cluster on that Redis) joins the ``redis`` group, which
``loadgroup`` runs on one worker, one test after another; a new Redis test joins it by
importing one of those names, as it must anyway to reach Redis.

Every worker collects the whole suite and must find the same tests in the same order, so a
test's id never holds a value drawn at import (a ``uuid4()`` in a ``parametrize`` list):
xdist stops the run at once when two workers disagree.
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # bench/ imports worker_id (through the daphne launcher) without pytest
    import pytest

#: The most workers ``-n auto`` starts; past a few, the live servers and browsers of the
#: workers compete for the same cores.
MAX_WORKERS = 4
#: The group of the tests that use the one Redis database.
REDIS_GROUP = "redis"


def worker_id() -> str:
    """``gw0``, ``gw1``… in an xdist worker; empty in a run without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def auto_workers(config: pytest.Config) -> int:
    """How many workers ``-n auto`` starts for this command line (0: none)."""
    from_env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if from_env:
        return int(from_env)
    if config.option.capture == "no":
        return 0
    arguments = [arg for arg in config.args if not arg.startswith("-")]
    if arguments and all(_names_a_file_or_test(arg, config) for arg in arguments):
        return 0
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def _names_a_file_or_test(argument: str, config: pytest.Config) -> bool:
    if "::" in argument:
        return True
    return (Path(config.invocation_params.dir) / argument).is_file()


def group_redis_tests(items: list[pytest.Item]) -> None:
    """Put every test of a module that reaches the tests' Redis into the ``redis`` group."""
    from pytest import mark

    from tests.app import servers, services

    # The ways in: the URL itself, and the two-worker cluster (which flushes it).
    ways_in = (("REDIS_URL", services.REDIS_URL), ("two_workers", servers.two_workers))
    for item in items:
        module = getattr(item, "module", None)
        if any(getattr(module, name, None) is value for name, value in ways_in) or (
            module is not None and _imports_a_way_in(module.__file__)
        ):
            item.add_marker(mark.xdist_group(REDIS_GROUP))
            _name_the_group(item)


@functools.cache
def _imports_a_way_in(path: str) -> bool:
    """Whether the module at ``path`` imports ``REDIS_URL`` or ``two_workers`` anywhere,
    inside a function too: such an import leaves no name on the module, and a test that
    flushed the Redis database from outside the group would wipe the group's runs."""
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module in {"tests.app.services", "tests.app.servers"}
        and any(alias.name in {"REDIS_URL", "two_workers"} for alias in node.names)
        for node in ast.walk(ast.parse(Path(path).read_text()))
    )


def _name_the_group(item: pytest.Item) -> None:
    """Write the group into the test's id, where ``loadgroup`` reads it (``<id>@redis``).

    xdist 3.8 does this itself by setting ``item._nodeid``, but pytest 9 keeps a node's id
    in ``item._id``, so xdist's suffix is lost and the group would be spread over all
    workers. Only in a worker of a ``loadgroup`` run, and only once.
    """
    if not worker_id() or not getattr(item.config.option, "loadgroup", False):
        return
    suffix = f"@{REDIS_GROUP}"
    if not item.nodeid.endswith(suffix):
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(item.nodeid + suffix)
