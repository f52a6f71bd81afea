"""How many examples a Hypothesis test draws: the ``ci`` profile or the quick ``default``.

CI (``CI=true``, as ``.ci/run`` sets it) loads ``ci``, where a test draws the full count it
names: ``examples(300)`` is 300. Everywhere else ``default`` draws a fifth of it (at least
10), enough to catch a regression in a quick loop; the full search is CI's job.
``HYPOTHESIS_PROFILE=ci`` (or pytest's ``--hypothesis-profile=ci``) runs the full count
anywhere. ``tests/conftest.py`` registers and loads the profiles before any test module is
imported, so ``examples`` sees the one in force.
"""

from __future__ import annotations

import os

from hypothesis import settings

#: ``max_examples`` of each profile; a test's count is scaled by ``profile / CI_EXAMPLES``.
CI_EXAMPLES = 100
QUICK_EXAMPLES = 20


def register_profiles() -> None:
    settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None)
    settings.register_profile("default", max_examples=QUICK_EXAMPLES, deadline=None)
    chosen = os.environ.get("HYPOTHESIS_PROFILE") or (
        "ci" if os.environ.get("CI", "").lower() == "true" else "default"
    )
    settings.load_profile(chosen)


def examples(full: int) -> int:
    """``full`` under the ``ci`` profile; scaled down (at least 10) under a smaller one."""
    scaled = full * settings.default.max_examples // CI_EXAMPLES
    return min(full, max(10, scaled))
