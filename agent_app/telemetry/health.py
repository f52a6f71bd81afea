"""``/healthz``: whether this worker should get traffic, for load balancers and orchestrators.

200 when the database answers, Redis answers (with ``REDIS_URL``) and the worker is not
shutting down; 503 otherwise, with what failed. A draining worker (SIGTERM, see
``agent_app.process.shutdown``) answers 503 at once, so the balancer sends its new sockets
elsewhere while its runs finish. The answer names no hosts, versions or errors.
"""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from agent_app import conf
from agent_app.process import shutdown

__all__ = ["healthz"]

logger = logging.getLogger(__name__)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _database(), "redis": _redis(), "accepting": not shutdown.draining()}
    healthy = all(value is not False for value in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", **checks}, status=200 if healthy else 503
    )


def _database() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        logger.warning("Health check: the database does not answer", exc_info=True)
        return False


def _redis() -> bool | None:
    url = conf.ZETT_REDIS_URL
    if not url:
        return None  # not configured: one process, nothing to check
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        logger.warning("Health check: Redis does not answer", exc_info=True)
        return False
