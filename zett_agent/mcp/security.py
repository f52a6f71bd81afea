"""The executable allow-list for stdio servers that come from configuration.

A stdio server runs a program on the worker's machine. A command written in code (an
assistant's ``mcp_servers``) is trusted like the rest of the code; a command read from
settings is checked with ``check_stdio_command`` against an allow-list of executables,
so a changed setting cannot start an arbitrary program. An allowed entry is either a bare
name (``npx``, ``uvx``: the command's first word must be exactly that name, which the OS
then finds on ``PATH``) or an absolute path (the first word must resolve to that file).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Sequence

__all__ = ["DEFAULT_ALLOWED_EXECUTABLES", "check_stdio_command"]

#: Launchers MCP server packages are commonly started with.
DEFAULT_ALLOWED_EXECUTABLES: frozenset[str] = frozenset({"npx", "uvx", "node", "python3", "docker"})


def check_stdio_command(
    command: Sequence[str], allowed: Collection[str] = DEFAULT_ALLOWED_EXECUTABLES
) -> list[str]:
    """Return ``command`` as a list if its executable is allowed; else raise ``ValueError``."""
    if isinstance(command, str) or not command or not all(isinstance(p, str) for p in command):
        raise ValueError(f"A stdio command must be a non-empty list of strings, got {command!r}")
    executable = command[0]
    if not executable or "\x00" in executable:
        raise ValueError(f"Invalid executable {executable!r}")
    names = {entry for entry in allowed if os.sep not in entry}
    paths = {os.path.realpath(entry) for entry in allowed if os.path.isabs(entry)}
    if os.sep not in executable and executable in names:
        return list(command)
    if os.path.isabs(executable) and os.path.realpath(executable) in paths:
        return list(command)
    resolved = shutil.which(executable) if os.sep not in executable else None
    hint = f" (found at {resolved})" if resolved else ""
    raise ValueError(
        f"The executable {executable!r}{hint} is not in the allowed list "
        f"{sorted(allowed)}; add it there to run this MCP server"
    )
