"""What every test shares: the Hypothesis profiles (``tests/examples.py``)."""

from tests.examples import register_profiles

register_profiles()
