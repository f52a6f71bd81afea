"""Reaching the real services (PostgreSQL, Redis) that some app tests need.

Locally a missing service skips those tests; under CI (``CI=true``) it fails them, because
CI is where "it works with the real services" has to be proven, and a skip there would
hide that nothing was tested.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import pytest

#: Where the services run; ``.ci/run`` and developer machines start them on these ports.
POSTGRES_URL = os.environ.get("ZETT_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("ZETT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def require_service(name: str, url: str) -> str:
    """Return ``url`` if its host accepts connections; skip (locally) or fail (CI) if not."""
    parts = urlsplit(url)
    default_port = {"postgres": 5432, "postgresql": 5432, "redis": 6379}.get(parts.scheme)
    address = (parts.hostname or "127.0.0.1", parts.port or default_port)
    try:
        with socket.create_connection(address, timeout=5):
            return url
    except OSError as error:
        message = f"{name} is not reachable at {address[0]}:{address[1]} ({error})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}; CI must start it before the tests run", pytrace=False)
        pytest.skip(message)
