"""Tests of the provider adapters against a local scripted HTTP server."""

import pytest

# support.py holds checks shared by both adapters' tests; rewritten, their failures read
# like the tests' own asserts.
pytest.register_assert_rewrite(f"{__name__}.support")
