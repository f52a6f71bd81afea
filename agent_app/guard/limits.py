"""Limits per person, not per socket: frame budgets, open sockets, chats created.

A limit per socket is no limit: a client opens twenty sockets and has twenty budgets. So
every limit here is keyed by the *person* behind a socket (``agent_app.guard.access.Person.key``:
a signed-in user, or an anonymous browser), whichever sockets and processes they use.

- **Frame budget** (``ZETT_WS_RATE_LIMIT``: ``burst`` frames at once, refilled at
  ``per_second``): one token bucket per person, shared by all their sockets. With
  ``ZETT_LIMITS_REDIS_URL`` set (by default ``REDIS_URL``, which is also what runs several
  worker processes) the bucket lives in Redis and is updated by one Lua script per frame,
  on Redis's clock, so it holds across processes. If Redis cannot be reached the process
  falls back to a bucket of its own (logged once per outage) rather than refusing everyone.
- **Open sockets** (``ZETT_WS_MAX_SOCKETS_PER_SESSION``, ``ZETT_WS_MAX_SOCKETS_PER_PERSON``):
  counted in the process that holds the sockets. A socket lives and dies in one process;
  a count shared through Redis would have to survive a process that dies without closing
  its sockets (leases and heartbeats), which the frame budget does not need. With N worker
  processes one person can therefore hold at most N times the per-person number.
- **Chats created per hour** (``ZETT_MAX_CHATS_PER_HOUR``): counted in the database by
  ``agent_app.guard.access.ensure_session`` (``created_at`` of the person's rows), so it is shared
  by every process by construction; this module only reads the number.

``current_limits()`` reads and validates the settings (``agent_app.checks`` reports the same
problems at ``manage.py check`` and at ASGI start-up, so a bad value never reaches a
handshake). ``limiter()`` is the registry of the running event loop; the consumer calls
``open_socket`` on connect, ``take_frame`` for every inbound frame and ``close_socket``
on disconnect.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from agent_app import conf
from agent_app.protocol.frames import ErrorCode, Refusal
from agent_app.telemetry import metrics

__all__ = [
    "LIMIT_SETTINGS",
    "Limiter",
    "Limits",
    "SocketTicket",
    "TokenBucket",
    "current_limits",
    "history_page_cost",
    "limit_problems",
    "limiter",
]

logger = logging.getLogger(__name__)

#: Close code of a socket refused for opening too many (4000-4999 are the application's).
TOO_MANY_SOCKETS_CLOSE_CODE = 4429


@dataclass(frozen=True, slots=True)
class Limits:
    """The validated limit settings."""

    burst: int
    per_second: float
    max_sockets_per_session: int
    max_sockets_per_person: int
    max_chats_per_hour: int
    redis_url: str


def limit_problems() -> list[tuple[str, str]]:
    """``(setting, what is wrong)`` for every invalid limit setting; empty when all are fine."""
    problems: list[tuple[str, str]] = []
    rate = conf.ZETT_WS_RATE_LIMIT
    if not isinstance(rate, dict) or {"burst", "per_second"} - set(rate):
        problems.append(
            ("ZETT_WS_RATE_LIMIT", f"must be a dict with 'burst' and 'per_second', got {rate!r}")
        )
    else:
        if not _is_int(rate["burst"]) or rate["burst"] < 1:
            problems.append(
                (
                    "ZETT_WS_RATE_LIMIT",
                    f"'burst' (ZETT_WS_RATE_BURST) must be an integer >= 1, got {rate['burst']!r}:"
                    " with 0 every frame would be refused",
                )
            )
        per_second = rate["per_second"]
        if not _is_number(per_second) or not 0 <= per_second < float("inf"):
            problems.append(
                (
                    "ZETT_WS_RATE_LIMIT",
                    "'per_second' (ZETT_WS_RATE_PER_SECOND) must be a finite number >= 0, "
                    f"got {per_second!r}",
                )
            )
    for name in (
        "ZETT_WS_MAX_SOCKETS_PER_SESSION",
        "ZETT_WS_MAX_SOCKETS_PER_PERSON",
        "ZETT_MAX_CHATS_PER_HOUR",
    ):
        value = conf.setting(name)
        if not _is_int(value) or value < 1:
            problems.append((name, f"must be an integer >= 1, got {value!r}"))
    redis_url = conf.ZETT_LIMITS_REDIS_URL
    if not isinstance(redis_url, str) or (
        redis_url and not redis_url.startswith(("redis://", "rediss://", "unix://"))
    ):
        problems.append(
            ("ZETT_LIMITS_REDIS_URL", f"must be empty or a redis:// URL, got {redis_url!r}")
        )
    return problems


#: The settings ``current_limits`` reads (a change to any of them drops its cached value).
LIMIT_SETTINGS = frozenset(
    {
        "ZETT_WS_RATE_LIMIT",
        "ZETT_WS_MAX_SOCKETS_PER_SESSION",
        "ZETT_WS_MAX_SOCKETS_PER_PERSON",
        "ZETT_MAX_CHATS_PER_HOUR",
        "ZETT_LIMITS_REDIS_URL",
    }
)


@functools.cache
def current_limits() -> Limits:
    """The limit settings, validated (``ImproperlyConfigured`` names every bad one).

    Read once and kept (every inbound frame asks): Django's ``setting_changed`` signal,
    which ``override_settings`` sends, drops the kept value.
    """
    problems = limit_problems()
    if problems:
        raise ImproperlyConfigured("; ".join(f"{name} {problem}" for name, problem in problems))
    rate = conf.ZETT_WS_RATE_LIMIT
    return Limits(
        burst=int(rate["burst"]),
        per_second=float(rate["per_second"]),
        max_sockets_per_session=conf.ZETT_WS_MAX_SOCKETS_PER_SESSION,
        max_sockets_per_person=conf.ZETT_WS_MAX_SOCKETS_PER_PERSON,
        max_chats_per_hour=conf.ZETT_MAX_CHATS_PER_HOUR,
        redis_url=conf.ZETT_LIMITS_REDIS_URL,
    )


@receiver(setting_changed)
def _forget_limits(*, setting: str, **kwargs: Any) -> None:
    if setting in LIMIT_SETTINGS:
        current_limits.cache_clear()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class TokenBucket:
    """``burst`` tokens at once, refilled at ``per_second``; one token per frame."""

    def __init__(self, burst: int, per_second: float, clock: Callable[[], float] = time.monotonic):
        if burst < 1 or per_second < 0:
            raise ValueError(f"need burst >= 1 and per_second >= 0, got {burst}, {per_second}")
        self.burst = burst
        self.per_second = per_second
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()

    def take(self, cost: int = 1) -> bool:
        """Spend ``cost`` tokens; False (spending none) when the budget has fewer."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.per_second)
        self._updated = now
        if self._tokens < cost:
            return False
        self._tokens -= cost
        return True


#: One token bucket in Redis: KEYS[1] the person's bucket, ARGV burst, refill rate, cost.
#: Redis's own clock, so every process agrees on the time; the key expires once full.
_TAKE_SCRIPT = """
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3]) or 1
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local taken = 0
if tokens >= cost then
  tokens = tokens - cost
  taken = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
if rate > 0 then
  redis.call('EXPIRE', KEYS[1], math.ceil((burst - tokens) / rate) + 1)
else
  redis.call('EXPIRE', KEYS[1], 86400)
end
return taken
"""
#: Messages of a ``history_before`` page that cost as much as one ordinary frame.
HISTORY_ROWS_PER_FRAME = 5


def history_page_cost(limit: int) -> int:
    """What a ``history_before`` frame asking for ``limit`` messages costs in frames.

    Reading and encoding a page costs the server about a thousand times what its 60-byte
    request costs the client: charged as one frame, a person's budget alone could keep a
    core busy reading history. Charged by its size (a full page of 50 as 11 frames), the
    default budget sustains about two pages a second, what scrolling up needs.
    """
    return 1 + limit // HISTORY_ROWS_PER_FRAME


#: Prefix of the Redis keys of the frame budgets.
REDIS_PREFIX = "zett:budget:"


@dataclass(eq=False)
class SocketTicket:
    """An open socket as the limiter counts it; handed back to ``close_socket``."""

    person: str
    session_id: str
    closed: bool = False


class Limiter:
    """Frame budgets and socket counts of one event loop (one worker process)."""

    def __init__(self) -> None:
        self._buckets: dict[str, TokenBucket] = {}
        self._sockets_per_person: Counter[str] = Counter()
        self._sockets_per_session: Counter[str] = Counter()
        self._redis: Any = None
        self._redis_url = ""
        self._script: Any = None
        self._redis_down = False

    # --- sockets ---------------------------------------------------------------------------

    def open_socket(self, person: str, session_id: str) -> SocketTicket:
        """Count a new socket; ``Refusal`` (``rate_limited``) when it is one too many."""
        limits = current_limits()
        if self._sockets_per_person[person] >= limits.max_sockets_per_person:
            metrics.rate_limited("sockets_per_person")
            raise Refusal(
                ErrorCode.RATE_LIMITED,
                f"You have {limits.max_sockets_per_person} sockets open; close a tab or wait "
                "before opening another",
            )
        if self._sockets_per_session[session_id] >= limits.max_sockets_per_session:
            metrics.rate_limited("sockets_per_session")
            raise Refusal(
                ErrorCode.RATE_LIMITED,
                f"This chat has {limits.max_sockets_per_session} sockets open; close one "
                "before opening another",
            )
        self._sockets_per_person[person] += 1
        self._sockets_per_session[session_id] += 1
        metrics.socket_opened()
        return SocketTicket(person, session_id)

    def close_socket(self, ticket: SocketTicket) -> None:
        """Stop counting a socket (idempotent); a person with no socket left is forgotten."""
        if ticket.closed:
            return
        ticket.closed = True
        metrics.socket_closed()
        _decrement(self._sockets_per_person, ticket.person)
        _decrement(self._sockets_per_session, ticket.session_id)
        if ticket.person not in self._sockets_per_person:
            self._buckets.pop(ticket.person, None)

    def open_sockets(self, person: str | None = None) -> int:
        """Sockets counted in this process: of ``person``, or of everyone."""
        if person is None:
            return sum(self._sockets_per_person.values())
        return self._sockets_per_person[person]

    # --- frames ----------------------------------------------------------------------------

    async def take_frame(self, person: str, cost: int = 1) -> bool:
        """Spend ``cost`` frames of ``person``'s budget; False when it has fewer left.

        A frame whose answer costs the server far more than an ordinary one
        (``history_before``: ``history_page_cost``) is charged as several; never more
        than the whole burst, so it can always be sent once the budget is full.
        """
        limits = current_limits()
        cost = max(1, min(cost, limits.burst))
        if limits.redis_url:
            taken = await self._take_in_redis(person, limits, cost)
            if taken is not None:
                if not taken:
                    metrics.rate_limited("frames")
                return taken
        bucket = self._buckets.get(person)
        if bucket is None or (bucket.burst, bucket.per_second) != (
            limits.burst,
            limits.per_second,
        ):
            bucket = self._buckets[person] = TokenBucket(limits.burst, limits.per_second)
        if bucket.take(cost):
            return True
        metrics.rate_limited("frames")
        return False

    async def _take_in_redis(self, person: str, limits: Limits, cost: int = 1) -> bool | None:
        """The shared bucket's verdict, or None when Redis cannot be reached."""
        try:
            script = self._redis_script(limits.redis_url)
            taken = await script(
                keys=[REDIS_PREFIX + person], args=[limits.burst, limits.per_second, cost]
            )
        except Exception as error:  # any Redis or connection failure: fall back, say so once
            if not self._redis_down:
                self._redis_down = True
                logger.warning(
                    "Frame budgets fall back to this process: Redis at %s failed (%s)",
                    limits.redis_url,
                    error,
                )
            return None
        if self._redis_down:
            self._redis_down = False
            logger.info("Frame budgets are shared through Redis again")
        return bool(taken)

    def _redis_script(self, url: str) -> Any:
        if self._script is None or url != self._redis_url:
            from agent_app.bus.pool import pooled_redis

            self._redis = pooled_redis(url, wait=2, socket_timeout=2, socket_connect_timeout=2)
            self._redis_url = url
            self._script = self._redis.register_script(_TAKE_SCRIPT)
        return self._script

    async def aclose(self) -> None:
        """Close the Redis connection pool, if one was opened."""
        if self._redis is not None:
            redis, self._redis, self._script = self._redis, None, None
            await redis.aclose()


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Limiter] = (
    weakref.WeakKeyDictionary()
)


def limiter() -> Limiter:
    """The limiter of the running event loop (asyncio objects never cross loops)."""
    loop = asyncio.get_running_loop()
    found = _limiters.get(loop)
    if found is None:
        found = _limiters[loop] = Limiter()
    return found
