"""The facts a benchmark result is meaningless without: machine, Python and versions."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version

__all__ = ["describe_machine", "package_versions"]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def describe_machine() -> dict[str, str | int]:
    """CPU model, core count and Python build of this process."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": platform.platform(terse=True),
    }


def package_versions(names: list[str]) -> dict[str, str]:
    """Installed version of each distribution, or ``"not installed"``."""
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found
