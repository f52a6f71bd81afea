"""What the OpenAI and Anthropic adapters share because both SDKs are built the same way.

``openai`` and ``anthropic`` are generated from one template: an ``Async…`` client with
``close()``, a ``create(stream=True)`` call whose stream has ``close()``, and one exception
tree (``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``,
``APIResponseValidationError``). ``SDKModel`` owns what follows from that: validating the
settings, building the client on the first request (so importing an adapter imports no SDK),
closing it, running one attempt for ``stream_with_retries``, and translating the exceptions
both SDKs raise alike. A subclass says what differs: how its client is built, how a request
becomes the ``create`` call, how its stream is read, and its status and stream errors.

One attempt first asks the switch of real requests (``zett_agent.providers.switch``: off in
tests), then opens the stream, feeds each item to a fresh reader and closes the HTTP response
in ``finally``; cancellation and retries are told in ``zett_agent.providers.base``.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from types import ModuleType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
from zett_agent.providers.base import (
    ProviderConnectionError,
    ProviderError,
    ProviderResponseError,
    RetryPolicy,
    parse_retry_after,
    status_error,
    stream_with_retries,
)
from zett_agent.providers.switch import check_model_request

__all__ = ["SDKModel", "StreamReader"]


class _Client(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Client)


class StreamReader(Protocol):
    """Turns the items of one SDK stream into model events and, at the end, the response."""

    def feed(self, item: Any) -> list[ModelEvent]:
        """Events for one stream item, in the order it carries them."""
        ...

    def finish(self) -> ModelResponse:
        """The complete response; raises ProviderResponseError for a cut or broken stream."""
        ...


class SDKModel(ABC, Generic[ClientT]):
    """An ``AgentModel`` on a streaming SDK client, built on the first request."""

    #: ``"openai"`` or ``"anthropic"``: the ``provider`` of its errors and messages.
    provider: ClassVar[str]
    #: The SDK's module, imported on the first request.
    sdk_name: ClassVar[str]
    #: The environment variable the SDK reads the key from; auth errors name it.
    key_variable: ClassVar[str]
    #: What one item of the stream is called in the API's terms ("chunk", "event").
    stream_item: ClassVar[str]
    #: The ``max_tokens`` used when none is given (None: the server decides).
    default_max_tokens: ClassVar[int | None] = None

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_tokens: int | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        """Check the settings; None stands for the default.

        The defaults: ``api_key``, the SDK's ``key_variable``; ``max_tokens``,
        ``default_max_tokens``; ``retry_policy``, ``RetryPolicy()``.
        """
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model cannot be empty")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_tokens is None:
            max_tokens = self.default_max_tokens
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {max_tokens}")
        self.model = model.strip()
        self.base_url = base_url
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.retry_policy = retry_policy or RetryPolicy()
        self._api_key = api_key
        self._client: ClientT | None = None
        self._closed = False

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"{type(self).__name__}({self.model!r}{where})"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one response, retrying failures that happen before the first event."""
        return stream_with_retries(lambda: self._attempt(request), self.retry_policy)

    async def aclose(self) -> None:
        """Release the HTTP client; the model cannot be used afterwards."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # --- what a subclass provides ---------------------------------------------------------

    @abstractmethod
    def _build_client(self) -> ClientT:
        """A new client, built from ``_client_options()``."""

    @abstractmethod
    def _label(self) -> str:
        """Who answers, as error messages name it ("OpenAI", "Anthropic API at …")."""

    @abstractmethod
    async def _open_stream(self, client: ClientT, request: ModelRequest) -> Any:
        """Send ``request`` and return the SDK's stream of items."""

    @abstractmethod
    def _reader(self) -> StreamReader:
        """A reader for one attempt's stream."""

    @abstractmethod
    def _translate_status(self, error: Any, label: str) -> ProviderError:
        """The error for the SDK's ``APIStatusError``."""

    @abstractmethod
    def _translate_other(self, error: Exception, label: str) -> ProviderError | None:
        """The error for an exception only this SDK raises; None for anything else."""

    # --- shared machinery -----------------------------------------------------------------

    def _get_client(self) -> ClientT:
        if self._closed:
            raise ProviderError(
                f"Cannot send a request, as the {type(self).__name__} has been closed.",
                provider=self.provider,
            )
        if self._client is None:
            self._client = self._build_client()
        return self._client

    def _sdk(self) -> ModuleType:
        return importlib.import_module(self.sdk_name)

    def _client_options(self) -> dict[str, Any]:
        """The settings every SDK client takes, with the SDK's own retry loop switched off."""
        return {
            "api_key": self._api_key,
            "base_url": self.base_url,
            "timeout": self.timeout,
            "max_retries": 0,  # stream_with_retries owns the retry policy
        }

    def _status_error(
        self, label: str, status: int, detail: str, headers: Mapping[str, str]
    ) -> ProviderError:
        """The error for an HTTP error response, with the server's ``Retry-After``."""
        return status_error(
            provider=self.provider,
            label=label,
            status=status,
            detail=detail,
            key_variable=self.key_variable,
            retry_after=parse_retry_after(headers),
        )

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        check_model_request(f"{self._label()} (model {self.model!r})")  # before any client
        client = self._get_client()
        try:
            sdk_stream = await self._open_stream(client, request)
        except Exception as error:
            translated = self._translate(error)
            if translated is None:
                raise
            raise translated from error
        reader = self._reader()
        try:
            while True:
                try:
                    item = await anext(sdk_stream)
                except StopAsyncIteration:
                    break
                except Exception as error:
                    translated = self._translate(error, streaming=True)
                    if translated is None:
                        raise
                    raise translated from error
                for event in reader.feed(item):
                    yield event
            yield ModelEvent.completed(reader.finish())
        finally:
            await sdk_stream.close()

    def _translate(self, error: Exception, *, streaming: bool = False) -> ProviderError | None:
        """Turn an SDK (or decoding) exception into a ProviderError; None for anything else."""
        sdk = self._sdk()
        label = self._label()
        if isinstance(error, sdk.APIStatusError):
            return self._translate_status(error, label)
        if isinstance(error, sdk.APITimeoutError):
            return ProviderConnectionError(
                f"{label} did not answer within {self.timeout:g}s ({error.request.url})",
                provider=self.provider,
                url=str(error.request.url),
            )
        if isinstance(error, sdk.APIConnectionError):
            cause = error.__cause__ or error
            failure = "Lost the connection to" if streaming else "Could not connect to"
            return ProviderConnectionError(
                f"{failure} {error.request.url} ({label}): {cause}",
                provider=self.provider,
                url=str(error.request.url),
            )
        if isinstance(error, sdk.APIResponseValidationError):
            return ProviderResponseError(
                f"{label} sent a response that does not match the API: {error.message}",
                provider=self.provider,
            )
        if isinstance(error, json.JSONDecodeError):
            return ProviderResponseError(
                f"{label} sent a stream {self.stream_item} that is not JSON: {error.msg}",
                provider=self.provider,
            )
        return self._translate_other(error, label)
