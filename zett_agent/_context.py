"""Per-request objects: ``AgentRunConfig``, ``AgentState`` and ``AgentRunContext``.

They are exported from ``zett_agent.agent``; this module only keeps ``agent.py`` short.
Extensions, tools and the loop's helpers all name the context, so it names none of the
machinery above it: what it asks of its live request and of a resumption is the two
small protocols below (``zett_agent._request.Request`` and ``zett_agent._resume.Resumption``
are what fill them).
"""

from __future__ import annotations

import copy
import itertools
import os
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, Protocol

from zett_agent._held import HeldExtension, HeldTool, is_held_tool
from zett_agent.events import AgentEvent, AgentEventType, RelayedEvent, relayed
from zett_agent.exceptions import AgentProtocolError
from zett_agent.messages import AnyMessage, Message, SystemMessage, UserMessage
from zett_agent.model import AgentModel, ServerToolDefinition
from zett_agent.phases import AgentPhase

if TYPE_CHECKING:
    from zett_agent.extensions.events import ExtensionEvent, MessageTiming
    from zett_agent.history import _HistoryLease

__all__ = ["AgentRunConfig", "AgentRunContext", "AgentState", "uuid7"]


class _LiveRequest(Protocol):
    """What a context asks of the request it belongs to (``zett_agent._request.Request``)."""

    async def emit_from_extension(self, event: AgentEvent) -> None: ...

    async def relay(self, event: AgentEvent) -> None: ...

    def end_after_tools(self) -> None: ...

    async def publish(
        self, event: ExtensionEvent, *, target: HeldExtension | str | type | None = None
    ) -> None: ...

    async def append_now(self, message: AnyMessage, timing: MessageTiming | None) -> None: ...

    def withdraw(self, extension: HeldExtension) -> None: ...


class _Deadlines(Protocol):
    """What a resumed request's waits ask of it (``zett_agent._resume.Resumption``)."""

    def deadline(self, correlation_id: str) -> datetime | None: ...


class _Entropy:
    """The random part of ids, drawn from ``os.urandom`` a block at a time.

    One system call per ``_IDS_PER_BLOCK`` ids instead of one per id (the call costs more
    than building the id), and each id's random part (version and variant digits included)
    formatted with the block, in one comprehension. ``take`` is safe across threads
    without a lock: a block and its counter are read as one tuple, and a counter hands each
    index out once, so two ids never share digits. A forked child draws a block of its own
    (``os.register_at_fork``), so parent and child never hand out the same digits.
    """

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current: tuple[list[str], Callable[[], int]] = self._draw()

    @staticmethod
    def _draw() -> tuple[list[str], Callable[[], int]]:
        digits = os.urandom(_ID_RANDOM_BYTES * _IDS_PER_BLOCK).hex()
        width = 2 * _ID_RANDOM_BYTES
        # Of twenty random hex digits: 12 bits after the version, the variant's two low
        # bits and 62 more after it (the first digit is left unused).
        tails = [
            f"7{digits[at + 1 : at + 4]}-{_VARIANT[digits[at + 4]]}{digits[at + 5 : at + 8]}"
            f"-{digits[at + 8 : at + width]}"
            for at in range(0, len(digits), width)
        ]
        return tails, itertools.count().__next__

    def refill(self) -> None:
        self.current = self._draw()

    def take(self) -> str:
        """The random part of a fresh id: ``7xxx-yxxx-xxxxxxxxxxxx``."""
        while True:
            tails, counter = self.current
            index = counter()
            if index < _IDS_PER_BLOCK:
                return tails[index]
            self.refill()


_ID_RANDOM_BYTES = 10
_IDS_PER_BLOCK = 256
#: A random hex digit -> one with the variant bits 0b10 and the digit's two low bits.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
_ENTROPY = _Entropy()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ENTROPY.refill)
#: The last millisecond an id was made in, and its text (``xxxxxxxx-xxxx-``): ids made in
#: the same millisecond share it. Replaced as one tuple, so threads read a consistent pair.
_millis_text: tuple[int, str] = (-1, "")


def uuid7() -> str:
    """A time-ordered UUID (RFC 9562 version 7) as a string.

    48 bits of Unix milliseconds, the version (7), 12 random bits, the variant (0b10) and
    62 random bits, formatted as ``str(uuid.UUID(...))`` would: the time part is formatted
    once per millisecond, the random part with its block (``_Entropy``).
    """
    global _millis_text
    millis = time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF
    cached = _millis_text
    if cached[0] != millis:
        text = f"{millis:012x}"
        cached = _millis_text = (millis, f"{text[:8]}-{text[8:]}-")
    return cached[1] + _ENTROPY.take()


def _normalise_id(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str or None, got {type(value).__name__}")
    value = value.strip()
    return value or None


@dataclass(frozen=True, slots=True)
class AgentRunConfig:
    """Routing identity of a request. Blank ids normalise to None.

    A request fills a missing ``session_id`` (the agent's initialized one, else a new
    UUIDv7) and a missing ``request_id`` (a new UUIDv7).
    """

    session_id: str | None = None
    request_id: str | None = None
    parent_session_id: str | None = None

    def __post_init__(self) -> None:
        for field in ("session_id", "request_id", "parent_session_id"):
            object.__setattr__(self, field, _normalise_id(getattr(self, field), field))


AgentRunConfig.__module__ = "zett_agent.agent"

#: Event types an extension may emit through ``AgentRunContext.emit``.
_EXTENSION_EVENT_TYPES = frozenset(
    {
        AgentEventType.CUSTOM,
        AgentEventType.COMPACTION_STARTED,
        AgentEventType.COMPACTION_TEXT_DELTA,
        AgentEventType.COMPACTION_REASONING_DELTA,
        AgentEventType.COMPACTION_COMPLETED,
    }
)


class AgentState:
    """The context of one request: its messages (read-only view) and its phase.

    Inside, the messages are ``_messages`` with, when ``_at`` is set, a run of messages
    logically inserted at that index without having been copied there: a history borrowed
    from ``ValidatedHistory`` (``_lease``, restored by the in-memory accumulator) or the
    tuple the previous read returned (``_block``). The first read after a restore builds
    its tuple straight from the borrowed list, the later ones extend the previous tuple, so
    a long history is copied once per model call and never into a list of the request's
    own. Anything that needs one list (an insertion inside the run, ``replace_messages``, a
    second restore) first copies the run into ``_messages`` (``_unfold``).
    """

    __slots__ = (
        "_at",
        "_block",
        "_lease",
        "_messages",
        "_snapshot",
        "phase",
        "request_id",
        "session_id",
    )

    def __init__(self, session_id: str, request_id: str) -> None:
        self.session_id = session_id
        self.request_id = request_id
        self.phase = AgentPhase.CREATED
        self._messages: list[AnyMessage] = []
        self._snapshot: tuple[AnyMessage, ...] | None = ()
        self._block: tuple[AnyMessage, ...] | None = None
        self._lease: _HistoryLease | None = None
        #: Where the run (``_block`` or ``_lease``) sits in ``_messages``; None without one.
        self._at: int | None = None

    @property
    def messages(self) -> tuple[AnyMessage, ...]:
        """The request's messages in order; edit them through the context."""
        snapshot = self._snapshot
        if snapshot is None:
            snapshot = self._snapshot = self._freeze()
        return snapshot

    def _freeze(self) -> tuple[AnyMessage, ...]:
        """The messages as a tuple, with one copy of the references; a run becomes it."""
        at = self._at
        if at is None:
            return tuple(self._messages)
        lease = self._lease
        if lease is not None:
            frozen = lease.freeze(self._messages, at)
            self._lease = None
        elif at:  # something was inserted before the previous tuple
            return tuple(self._unfold())
        else:
            block = self._block
            assert block is not None
            frozen = block + tuple(self._messages) if self._messages else block
        # The tuple is the run from now on: later appends extend it with one copy.
        self._block, self._messages, self._at = frozen, [], 0
        return frozen

    def _iter(self) -> Iterator[AnyMessage]:
        """The messages in order, without building them into one sequence."""
        at = self._at
        if at is None:
            return iter(self._messages)
        around = self._messages
        if self._lease is not None:
            run: Iterable[AnyMessage] = islice(self._lease.messages, self._lease.length)
        else:
            assert self._block is not None
            run = self._block
        return chain(islice(around, at), run, islice(around, at, None))

    def _leading_system(self) -> int:
        """How many system messages open the context (the instructions at its head)."""
        count = 0
        for message in self._iter():
            if not isinstance(message, SystemMessage):
                break
            count += 1
        return count

    def _last(self) -> AnyMessage | None:
        """The last message, found without building the list."""
        around, at = self._messages, self._at
        if at is None or len(around) > at:
            return around[-1] if around else None
        lease = self._lease
        if lease is not None:
            if lease.length:
                return lease.messages[lease.length - 1]
        elif self._block:
            return self._block[-1]
        return around[at - 1] if at else None

    def _unfold(self) -> list[AnyMessage]:
        """``_messages`` holding every message (the run copied into it), for an edit."""
        at = self._at
        if at is None:
            return self._messages
        around = self._messages
        messages = around[:at]
        lease = self._lease
        if lease is not None:
            messages += lease.messages
            del messages[at + lease.length :]
            lease.release()
        else:
            assert self._block is not None
            messages += self._block
        messages += around[at:]
        self._messages, self._block, self._lease, self._at = messages, None, None, None
        return messages

    def _borrow(self, lease: _HistoryLease) -> None:
        """Restore a borrowed history after the leading system messages, copying nothing."""
        if self._at is not None:  # a run is there already: copy this one in as usual
            messages = lease.messages[: lease.length]
            lease.release()
            current = self._unfold()
            index = self._leading_system()
            current[index:index] = messages
        else:
            self._at = self._leading_system()
            self._lease = lease
        self._snapshot = None

    def _return_borrowed(self) -> None:
        """Give a borrowed history back, copying it in (the request ends before reading it)."""
        if self._lease is not None:
            self._unfold()

    def __repr__(self) -> str:
        length = len(self._messages)
        if self._lease is not None:
            length += self._lease.length
        elif self._block is not None:
            length += len(self._block)
        return (
            f"<AgentState session_id={self.session_id!r} phase={self.phase.value} "
            f"messages={length}>"
        )


AgentState.__module__ = "zett_agent.agent"


class AgentRunContext:
    """Everything one request shares with its extensions.

    ``tools`` and ``server_tools`` are request-scoped registries seeded from the agent;
    ``metadata`` and ``tags`` come from ``Agent.stream``. Messages added with
    ``add_message`` or ``replace_messages`` are published to extensions as
    ``MessageAppendedEvent`` when the current hook stage ends (setup additions after
    ``on_message``); history put back with ``restore_messages`` is not.
    """

    __slots__ = (
        "_request",
        "_resumption",
        "_unpublished",
        "config",
        "extensions",
        "input_message",
        "metadata",
        "model",
        "server_tools",
        "state",
        "tags",
        "tools",
    )

    def __init__(
        self,
        *,
        request: _LiveRequest,
        config: AgentRunConfig,
        model: AgentModel,
        input_message: UserMessage | None,
        tools: dict[str, HeldTool],
        extensions: tuple[HeldExtension, ...],
        metadata: dict[str, Any],
        tags: dict[str, Any],
        resumption: _Deadlines | None = None,
    ) -> None:
        assert config.session_id is not None and config.request_id is not None
        # Weak, so that a finished request is freed by reference counting alone: a cycle
        # context <-> request would keep the whole context (and its messages) alive until
        # the garbage collector found it, and make every collection walk it meanwhile.
        self._request = weakref.ref(request)
        #: Replies and deadlines of a resumed request (``Agent.resume_stream``), else None.
        self._resumption = resumption
        self.config = config
        self.state = AgentState(config.session_id, config.request_id)
        self.model = model
        self.input_message = input_message
        self.tools = tools
        #: Provider-hosted tools of this request by name (``configuration["name"]``, else
        #: ``type``), in registration order.
        self.server_tools: dict[str, ServerToolDefinition] = {}
        self.extensions = extensions
        self.metadata = metadata
        self.tags = tags
        self._unpublished: list[AnyMessage] = []

    @property
    def session_id(self) -> str:
        return self.config.session_id  # type: ignore[return-value]

    @property
    def request_id(self) -> str:
        return self.config.request_id  # type: ignore[return-value]

    @property
    def resuming(self) -> bool:
        """True for a request started by ``Agent.resume_stream``: restore open tool calls.

        A memory or persistence extension restores with
        ``valid_history(..., keep_open_tail=context.resuming)``.
        """
        return self._resumption is not None

    async def emit(self, event: AgentEvent) -> None:
        """Stream a CUSTOM or COMPACTION_* event of this session to the consumer."""
        if event.type not in _EXTENSION_EVENT_TYPES:
            raise AgentProtocolError(
                f"Extensions may emit CUSTOM and COMPACTION_* events only, got {event.type.value}"
            )
        if event.session_id != self.session_id:
            raise AgentProtocolError(
                f"Cannot emit an event of session {event.session_id!r} "
                f"from a request of session {self.session_id!r}"
            )
        await self._live_request("emit").emit_from_extension(event)

    async def relay(self, event: AgentEvent, *, agent: str, parent_tool_call_id: str) -> None:
        """Stream an event of a sub-run (another agent's request run by one of this
        request's tools) to this request's consumer, marked with ``agent`` and
        ``parent_tool_call_id``; any event type but ``RUN_COMPLETED``, its phase kept. An
        event relayed already (the sub-run's own sub-run's) keeps its marks.

        The sub-run runs in its own session or in this one (its request is another
        agent's); the event is handed over as this session's, with the same back-pressure
        as the request's own events.
        """
        if event.type is AgentEventType.RUN_COMPLETED:
            raise AgentProtocolError("A sub-run's RUN_COMPLETED is its tool's result, not relayed")
        if not agent or not parent_tool_call_id:
            raise AgentProtocolError("A relayed event needs its agent and its parent tool call")
        if isinstance(event, RelayedEvent):  # a sub-run's sub-run's: keeps the innermost marks
            agent, parent_tool_call_id = event.agent, event.parent_tool_call_id
        marked = relayed(event, self.session_id, agent, parent_tool_call_id)
        await self._live_request("relay").relay(marked)

    def end_after_tools(self) -> None:
        """End the request once its current tool batch is settled, with no model call
        after it: ``RUN_COMPLETED`` carries that batch's assistant message. For a tool
        that hands the conversation to another agent, which answers the rest of the turn.
        """
        self._live_request("end").end_after_tools()

    async def publish(
        self,
        extension_event: ExtensionEvent,
        *,
        target: HeldExtension | str | type[HeldExtension] | None = None,
    ) -> None:
        """Deliver an extension event to every extension's ``on_event``, or to ``target``.

        ``target`` is an extension, its name, or its class; a class that more than one
        registered extension belongs to is ambiguous (``ValueError``), as is an unknown one.
        """
        await self._live_request("publish").publish(extension_event, target=target)

    def withdraw(self, extension: HeldExtension) -> None:
        """Leave ``extension`` out of every later hook of this request (its stages and
        ``on_event``): an extension with nothing to do for this request, such as a tracer
        whose run was not sampled, then costs it nothing more. A stage or event delivery
        already under way still reaches it; ``publish(target=extension)`` still does.
        """
        request = self._request()
        if request is not None:
            request.withdraw(extension)

    def _live_request(self, action: str) -> _LiveRequest:
        request = self._request()
        if request is None:
            raise AgentProtocolError(
                f"Cannot {action}: request {self.request_id!r} of session {self.session_id!r} "
                "has ended"
            )
        return request

    def register_tool(self, tool: HeldTool) -> None:
        """Offer a local tool for this request only."""
        if not is_held_tool(tool):
            raise TypeError(f"register_tool needs an AgentTool (use @tool), got {tool!r}")
        if tool.name in self.tools:
            raise ValueError(f"Tool {tool.name!r} is already registered")
        self.tools[tool.name] = tool

    def register_server_tool(self, tool: ServerToolDefinition) -> None:
        """Offer a provider-hosted tool for this request only.

        Its name is ``configuration["name"]`` when given, else its ``type``; two server
        tools with one name are a ``ValueError`` (a provider would refuse the request).
        """
        if not isinstance(tool, ServerToolDefinition):
            raise TypeError(f"register_server_tool needs a ServerToolDefinition, got {tool!r}")
        name = _server_tool_name(tool)
        if name in self.server_tools:
            raise ValueError(f"Server tool {name!r} is already registered")
        # A copy: an extension that registers one definition in every request, then edits
        # this request's configuration, must not change the next request's.
        self.server_tools[name] = ServerToolDefinition(
            tool.type, copy.deepcopy(dict(tool.configuration))
        )

    def add_message(self, message: AnyMessage, *, index: int | None = None) -> None:
        """Insert a message into the context (append when ``index`` is None)."""
        if not isinstance(message, Message) or type(message) is Message:
            raise TypeError(f"add_message needs a message, got {type(message).__name__}")
        state = self.state
        if index is None:
            state._messages.append(message)
        elif state._at is not None and type(index) is int and 0 <= index <= state._at:
            state._messages.insert(index, message)  # before the run: it does not move
            state._at += 1
        else:
            state._unfold().insert(index, message)
        state._snapshot = None
        self._unpublished.append(message)

    async def append_message(
        self, message: AnyMessage, timing: MessageTiming | None = None
    ) -> None:
        """Append a message at the end and publish its ``MessageAppendedEvent`` now.

        Unlike ``add_message`` (published when the stage ends), subscribers have seen it
        when this returns; messages added earlier in the stage are published first, so
        the order of publication stays the order of the context. ``timing`` defaults to
        ``MessageTiming.instant()``. During setup it behaves as ``add_message``.
        """
        if not isinstance(message, Message) or type(message) is Message:
            raise TypeError(f"append_message needs a message, got {type(message).__name__}")
        await self._live_request("append a message").append_now(message, timing)

    def replace_messages(self, messages: Iterable[AnyMessage], *, emit_new: bool = True) -> None:
        """Replace the whole context; publish messages that were not in it before."""
        new = list(messages)
        for message in new:
            if not isinstance(message, Message) or type(message) is Message:
                raise TypeError(f"replace_messages needs messages, got {type(message).__name__}")
        if self._unpublished:
            # A message added earlier in this stage but replaced away is no longer news.
            kept = {id(message) for message in new}
            self._unpublished = [m for m in self._unpublished if id(m) in kept]
        state = self.state
        if emit_new:
            known = {id(message) for message in state._iter()}
            self._unpublished.extend(m for m in new if id(m) not in known)
        if state._lease is not None:
            state._lease.release()
        state._messages, state._block, state._lease, state._at = new, None, None, None
        state._snapshot = None

    def restore_messages(self, messages: Sequence[AnyMessage], *, index: int | None = None) -> None:
        """Insert a session's stored history without publishing it (it is not new).

        ``index`` defaults to right after the leading system messages. Meant for
        ``on_state`` of a memory or persistence extension: it costs one copy of the
        references and no Python work per message, so restoring a long session stays
        cheap. The messages are therefore not type-checked one by one: pass message
        objects the runtime produced (e.g. recorded from ``MessageAppendedEvent``) or
        decoded with ``zett_agent.serialization.message_from_dict``.
        """
        if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
            raise TypeError(
                f"restore_messages needs a sequence of messages, got {type(messages).__name__}"
            )
        current = self.state._unfold()
        if index is None:
            index = self.state._leading_system()
        current[index:index] = messages
        self.state._snapshot = None

    def __repr__(self) -> str:
        return (
            f"<AgentRunContext session_id={self.session_id!r} request_id={self.request_id!r} "
            f"phase={self.state.phase.value}>"
        )


AgentRunContext.__module__ = "zett_agent.agent"


def _server_tool_name(tool: ServerToolDefinition) -> str:
    name = tool.configuration.get("name")
    return name if isinstance(name, str) and name else tool.type
