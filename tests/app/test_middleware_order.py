"""The site's middleware stack runs in one trip to a worker thread under ASGI.

Django adapts each middleware to the mode of the one below it: a sync-only middleware
above async-capable ones makes each of their methods a thread switch each way (about a
dozen per request, most of an AG-UI POST's time before its first byte). With every
sync-only middleware below the async-capable ones, the stack runs synchronously in one
trip and only the view is reached back on the event loop.
"""

from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string


def test_no_async_capable_middleware_sits_below_a_sync_only_one():
    kinds = [
        (path, getattr(import_string(path), "async_capable", False)) for path in settings.MIDDLEWARE
    ]
    first_sync_only = next((i for i, (_, can) in enumerate(kinds) if not can), len(kinds))
    below = [path for path, can in kinds[first_sync_only:] if can]
    assert below == [], f"async-capable middlewares below a sync-only one: {below}"
