"""``agent_app.headers.SecurityHeadersMiddleware``, the path host projects' ``MIDDLEWARE``
names: the middleware lives in ``agent_app.guard.headers``."""

from __future__ import annotations

from agent_app.guard.headers import SecurityHeadersMiddleware

__all__ = ["SecurityHeadersMiddleware"]
