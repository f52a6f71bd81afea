"""Redis clients whose commands wait for a free connection instead of failing.

redis-py's asyncio client keeps at most 100 connections in its default pool and raises
``MaxConnectionsError("Too many connections")`` for the 101st command in flight. A worker
with a few hundred busy chats has that many at once (each session's frames mirrored to its
replay stream, the frame budget of each inbound frame), so under load some commands would
fail: frames not fanned out, budgets falling back to one process. These clients use a
``BlockingConnectionPool`` instead: at most ``MAX_CONNECTIONS`` per client, and a command
that finds them all busy waits its turn (up to ``wait`` seconds, then ``ConnectionError``,
which callers already handle as Redis being unreachable).

The channel layer needs nothing of this: channels-redis sends through one connection per
shard, one command at a time.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis

__all__ = ["MAX_CONNECTIONS", "pooled_redis"]

#: Connections one client opens at most (a worker has one client per use).
MAX_CONNECTIONS = 64


def pooled_redis(url: str, *, wait: float, **options: Any) -> Redis:
    """A client for ``url`` on a bounded pool; ``options`` go to each connection."""
    pool = BlockingConnectionPool.from_url(
        url, max_connections=MAX_CONNECTIONS, timeout=wait, **options
    )
    return Redis.from_pool(pool)
