"""What every test shares: the Hypothesis profiles (``tests/examples.py``) and how the
suite spreads over worker processes (``tests/parallel.py``)."""

import pytest

from tests.examples import register_profiles
from tests.parallel import auto_workers, group_redis_tests

register_profiles()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return auto_workers(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    group_redis_tests(items)
