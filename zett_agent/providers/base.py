"""What every provider adapter shares: its errors, its retry policy, its argument parsing.

Errors::

    AgentError
     └── ProviderError               the provider failed; ``status_code`` when HTTP said so
          ├── ProviderAuthError      401/403 or no credentials: the message names the variable
          ├── ProviderConnectionError  the server could not be reached or timed out (``url``)
          └── ProviderResponseError  the provider answered something we cannot use (broken
                                     stream, malformed tool arguments JSON)

Each adapter translates its SDK's exceptions into these at one boundary and chains the
original with ``from``, so callers never import an SDK to handle a failure.

Retries and cancellation
------------------------
The SDKs' own retry loops are switched off (``max_retries=0``): they would retry behind our
back, with their own clocks, where a test cannot see them. ``stream_with_retries`` owns the
policy instead. One model call is a series of *attempts*; an attempt opens the HTTP stream
and turns what it reads into ``ModelEvent``s. When an attempt fails with a retryable error
(HTTP 408, 409, 429, any 5xx, or a provider error event of the same nature) *before it has
yielded a single event*, the wrapper sleeps and starts a new attempt: capped exponential
backoff with jitter, or the server's ``Retry-After`` when it sent one (a ``Retry-After``
longer than the policy accepts is not worth waiting for: the error surfaces at once). Once an
event has been yielded, the consumer has seen output that a second attempt would contradict,
so any later failure surfaces unchanged and the call is never retried.

Cancellation needs no special path. The runtime closes the stream (``aclose``) or cancels the
task that reads it; either raises inside the current ``await`` (a network read or the
backoff sleep), and every attempt closes its HTTP response in ``finally``, so the connection
is released at once and the server sees the client go. The sleep function is a field of the
policy, so tests inject one that returns immediately and records what it was asked to wait.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zett_agent.exceptions import AgentError
from zett_agent.model import ModelEvent

__all__ = [
    "ProviderAuthError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderResponseError",
    "RetryPolicy",
    "is_retryable_status",
    "parse_retry_after",
    "parse_tool_arguments",
    "status_error",
    "stream_with_retries",
]


class ProviderError(AgentError):
    """A model provider failed to produce a response."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        #: Which adapter raised it: ``"openai"`` or ``"anthropic"``.
        self.provider = provider
        #: The HTTP status, when the failure was an HTTP error response.
        self.status_code = status_code
        #: Whether a fresh attempt may succeed (the policy still decides whether to make one).
        self.retryable = retryable
        #: Seconds the server asked us to wait before retrying, if it said.
        self.retry_after = retry_after


class ProviderAuthError(ProviderError):
    """The provider rejected our credentials, or there were none to send."""


class ProviderConnectionError(ProviderError):
    """The provider's server could not be reached, or did not answer in time."""

    def __init__(self, message: str, *, provider: str, url: str | None = None) -> None:
        super().__init__(message, provider=provider)
        #: The URL the request was sent to.
        self.url = url


class ProviderResponseError(ProviderError):
    """The provider answered, but with something the adapter cannot turn into a response."""


def is_retryable_status(status: int) -> bool:
    """Request timeout, conflict, rate limit and server errors are worth another attempt."""
    return status in (408, 409, 429) or status >= 500


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` / ``Retry-After`` (seconds or a date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if seconds >= 0 else None
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def status_error(
    *,
    provider: str,
    label: str,
    status: int,
    detail: str,
    key_variable: str,
    retry_after: float | None = None,
) -> ProviderError:
    """Build the error for an HTTP error response, naming the variable on auth failures."""
    if status in (401, 403):
        verdict = "rejected the API key" if status == 401 else "refused access with this key"
        return ProviderAuthError(
            f"{label} {verdict} (HTTP {status}): {detail}. "
            f"Set {key_variable} to a valid key, or pass api_key= to the model.",
            provider=provider,
            status_code=status,
        )
    return ProviderError(
        f"{label} request failed (HTTP {status}): {detail}",
        provider=provider,
        status_code=status,
        retryable=is_retryable_status(status),
        retry_after=retry_after,
    )


def parse_tool_arguments(text: str, *, provider: str, name: str, call_id: str) -> dict[str, Any]:
    """Decode a tool call's JSON arguments; anything but a JSON object is the provider's fault.

    Empty text means "no arguments": some servers stream nothing for a parameterless call.
    """
    if not text.strip():
        return {}
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as error:
        raise ProviderResponseError(
            f"{provider} returned malformed JSON arguments for tool call {name!r} "
            f"(id {call_id}): {error.msg} at position {error.pos}; arguments were "
            f"{_preview(text)}",
            provider=provider,
        ) from error
    if not isinstance(arguments, dict):
        raise ProviderResponseError(
            f"{provider} returned tool call {name!r} (id {call_id}) with arguments that are "
            f"not a JSON object: {_preview(text)}",
            provider=provider,
        )
    return arguments


def _preview(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to wait before another attempt at a model call."""

    #: Attempts after the first one; 0 disables retrying.
    max_retries: int = 2
    #: Backoff before the first retry, in seconds; doubled for each further retry.
    initial_delay: float = 0.5
    #: Upper bound of the computed backoff, in seconds.
    max_delay: float = 8.0
    #: The longest ``Retry-After`` we agree to wait, in seconds; longer ones surface the error.
    max_retry_after: float = 60.0
    #: Up to this fraction of the backoff is removed at random, so clients spread out.
    jitter: float = 0.25
    #: Awaited with the delay in seconds. Tests inject one that does not wait.
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)
    #: Source of randomness for the jitter, returning values in [0, 1).
    random: Callable[[], float] = field(default=random.random, compare=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        for name in ("initial_delay", "max_delay", "max_retry_after"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter}")

    def delay(self, retry: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before retry number ``retry`` (0-based), or None to give up."""
        if retry >= self.max_retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        backoff = min(self.initial_delay * 2**retry, self.max_delay)
        return backoff * (1 - self.jitter * self.random())


def stream_with_retries(
    open_attempt: Callable[[], AsyncGenerator[ModelEvent, None]], policy: RetryPolicy
) -> AsyncIterator[ModelEvent]:
    """Run attempts until one succeeds, retrying only failures that happened before output.

    ``open_attempt`` returns a fresh async generator for each attempt; it must close its HTTP
    response when it is closed itself. Once the first event is out, every further item is
    the current attempt's own ``__anext__`` (no wrapper frame per event): from then on a
    failure surfaces unchanged anyway.
    """
    return _RetryingStream(open_attempt, policy)


class _RetryingStream:
    """The async iterator ``stream_with_retries`` returns."""

    __slots__ = ("_closed", "_live", "_open_attempt", "_policy")

    def __init__(
        self, open_attempt: Callable[[], AsyncGenerator[ModelEvent, None]], policy: RetryPolicy
    ) -> None:
        self._open_attempt = open_attempt
        self._policy = policy
        self._live: AsyncGenerator[ModelEvent, None] | None = None
        self._closed = False

    def __aiter__(self) -> _RetryingStream:
        return self

    def __anext__(self) -> Awaitable[ModelEvent]:
        live = self._live
        return live.__anext__() if live is not None else self._first()

    async def _first(self) -> ModelEvent:
        if self._closed:
            raise StopAsyncIteration
        retry = 0
        while True:
            attempt = self._open_attempt()
            try:
                event = await attempt.__anext__()
            except ProviderError as error:
                await attempt.aclose()
                wait = self._policy.delay(retry, error.retry_after) if error.retryable else None
                if wait is None:
                    raise
            except BaseException:
                await attempt.aclose()
                raise
            else:
                self._live = attempt
                return event
            await self._policy.sleep(wait)
            retry += 1

    async def aclose(self) -> None:
        self._closed = True
        live, self._live = self._live, None
        if live is not None:
            await live.aclose()
