"""Daphne's last shutdown step made safe: every open socket's application is cancelled.

Once our drain (``agent_app.process.shutdown``) hands SIGTERM over, daphne stops the
reactor, and before that it cancels each connection's application and waits for them
(``Server.kill_all_applications``, a "before shutdown" trigger). Daphne 4.2 reads each
connection's application by key, but an HTTP connection that ended within the last second
(daphne reaps them once a second) no longer has one: the ``KeyError`` ends that step
before the sockets' applications are cancelled, the loop stops with them still waiting,
and the interpreter crashes (SIGSEGV) when its garbage collector closes them at exit. A
health check or a page load just before a restart is enough.

``mend`` swaps in a version that skips connections without an application. It patches
the class, because daphne registers the bound method when its server starts running: so
it has to happen before that, when the ASGI application is loaded (``AppConfig.ready``),
and only where daphne's server module is already imported (importing it here would
install a Twisted reactor into any process that loads Django).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

__all__ = ["cancel_applications", "mend"]

logger = logging.getLogger(__name__)


def mend() -> None:
    """Give daphne's ``Server`` (if this process loaded it) the tolerant shutdown step."""
    module = sys.modules.get("daphne.server")
    if module is not None:
        module.Server.kill_all_applications = cancel_applications


def cancel_applications(server: Any) -> Any:
    """Cancel every connection's unfinished application; a Deferred that fires once all
    have ended (what Twisted waits for before it stops the loop)."""
    from twisted.internet import defer

    pending = []
    for details in server.connections.values():
        application = details.get("application_instance")
        if application is not None and not application.done():
            application.cancel()
            pending.append(application)
    logger.info("Cancelled %d application instance(s) at shutdown", len(pending))
    ended = asyncio.gather(*pending, return_exceptions=True)
    return defer.Deferred.fromFuture(ended)
