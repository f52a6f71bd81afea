"""Query strings out of daphne's access log.

daphne writes an access log line for every request at its default verbosity (``-v 1``,
to stdout): ``"GET /api/chats/?token=zett_… HTTP"``, the whole URL. zett never reads a
token from a query string and refuses a request that puts one there (401), but a client
that tried has still written its secret into the log, and URLs carry other things people
would rather not log (a search, an id). So ``quiet_queries`` makes daphne log a request's
path and, instead of its query, ``REDACTED_QUERY``: the log still shows that a query was
sent, never what it said.

It wraps ``Server.log_action``, the one door of daphne's access log, for every URL of the
process (the host's own included); installed from ``AppConfig.ready`` where daphne's
server module is loaded, like ``agent_app.sessions.daphne_exit``. A proxy in front keeps an
access log of its own: see docs/deploy.md for keeping query strings out of that one.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["REDACTED_QUERY", "quiet_queries", "without_query"]

#: What an access log line shows in place of a request's query string.
REDACTED_QUERY = "[redacted]"


def without_query(path: str) -> str:
    """``path`` with its query string (if any) replaced by ``REDACTED_QUERY``."""
    base, mark, _ = path.partition("?")
    return f"{base}?{REDACTED_QUERY}" if mark else base


def quiet_queries() -> None:
    """Make daphne's access log (if this process loaded daphne) leave query strings out."""
    module = sys.modules.get("daphne.server")
    if module is None:
        return
    server = module.Server
    original = server.log_action
    if getattr(original, "zett_quiet_queries", False):
        return

    def log_action(self: Any, protocol: str, action: str, details: dict[str, Any]) -> Any:
        path = details.get("path")
        if isinstance(path, str) and "?" in path:
            details = {**details, "path": without_query(path)}
        return original(self, protocol, action, details)

    log_action.zett_quiet_queries = True  # type: ignore[attr-defined]
    server.log_action = log_action
