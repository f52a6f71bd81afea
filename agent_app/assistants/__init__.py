"""Assistants: what a chat talks to (instructions, model, tools, approvals, who may use it).

A project declares its assistants in any installed app's ``assistants`` module, which the
app imports at start-up like ``admin.py``, or names them in ``ZETT_ASSISTANTS`` (dotted
paths)::

    from agent_app.assistants import Assistant, register, current_user

    @register
    class Support(Assistant):
        id = "support"
        name = "Support"
        instructions = "You help MyShop's customers."
        tools = [lookup_order, refund_order]
        approval_required = {"refund_order"}
        permission_required = "shop.view_order"

Each chat is bound to one assistant when it is stored (``ChatSession.assistant``); a new
chat takes the id its first message names, else the page's ``?assistant=``, else
``ZETT_DEFAULT_ASSISTANT``. ``registry`` holds one instance of each registered class; the
agent of a chat is built from it (``agent_app.agents.factory``). Inside a run, ``current_user()``
and ``current_chat()`` say who is chatting (``agent_app.assistants.current``); ``enter_run`` binds
them at the top of each run, once it has checked the person may still use the assistant.
Which model answers an assistant that names none is ``agent_app.assistants.llm``'s
business.

Bad declarations fail at start-up with the class named: no ``id``, an id that is not
``[a-z0-9_-]+``, two classes with one id. ``manage.py check`` finds the rest (a tool in
``approval_required`` the assistant does not have, an unknown default).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from channels.db import database_sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules, import_string

from agent_app import conf
from agent_app.assistants.current import bind, current_chat, current_user, person_of_chat
from agent_app.attachments.reading import (
    documents_exists_sql,
    documents_parameter,
    has_documents,
    note_documents,
)
from agent_app.process.connection import default_connection

if TYPE_CHECKING:
    from agent_app.models import ChatSession
    from zett_agent.extensions.base import AgentExtension
    from zett_agent.mcp import MCPServer
    from zett_agent.model import AgentModel
    from zett_agent.tools.base import AgentTool

__all__ = [
    "Assistant",
    "AssistantForbidden",
    "AssistantRegistry",
    "UnknownAssistant",
    "current_chat",
    "current_user",
    "enter_run",
    "register",
    "registry",
]

#: What an assistant id may look like (it is stored with each chat and shown in URLs).
ID_PATTERN = re.compile(r"[a-z0-9_-]{1,64}")

A = TypeVar("A", bound=type["Assistant"])


class UnknownAssistant(LookupError):
    """No assistant is registered under this id."""

    def __init__(self, assistant_id: str) -> None:
        known = ", ".join(registry.ids()) or "none"
        super().__init__(f"No assistant {assistant_id!r} is registered (registered: {known})")
        self.assistant_id = assistant_id


class Assistant:
    """One kind of agent people can chat with. Subclass it and ``@register`` the class."""

    #: Unique, ``[a-z0-9_-]+``; stored with each chat.
    id: ClassVar[str]
    #: Shown to people (the id when empty).
    name: ClassVar[str] = ""
    #: The system prompt; or override ``get_instructions``.
    instructions: ClassVar[str] = ""
    #: A ``ZETT_MODEL`` spec or an ``AgentModel``; None: ``ZETT_MODEL``.
    model: ClassVar[Any] = None
    #: zett_agent tools (``@tool``).
    tools: ClassVar[Sequence[AgentTool]] = ()
    #: Names of the tools that run only after the person approves the call.
    approval_required: ClassVar[Iterable[str]] = frozenset()
    #: Host-page tools: ``@tool`` functions the person's page runs (``client.onTool``);
    #: only their signature and docstring are used (``agent_app.agents.browser_tools``).
    browser_tools: ClassVar[Sequence[AgentTool]] = ()
    #: More ``AgentExtension`` instances for this assistant's agents.
    extensions: ClassVar[Sequence[AgentExtension]] = ()
    #: Names of external events its own ``ExternalEventExtension``s take from clients (the
    #: socket refuses every other name but the app's own replies; see ``reply_names``).
    reply_names: ClassVar[Iterable[str]] = ()
    #: ``"app_label.codename"`` a user needs; or override ``has_permission``.
    permission_required: ClassVar[str | None] = None
    #: ``zett_agent.mcp.MCPServer``\ s whose tools this assistant offers (besides the site's
    #: ``ZETT_MCP_SERVERS``); see docs/mcp.md.
    mcp_servers: ClassVar[Sequence[MCPServer]] = ()
    #: MCP tools that never need approval (a tool's own name or ``<server>__<tool>``); the
    #: others need it unless their server annotates them ``readOnlyHint: true``.
    mcp_no_approval: ClassVar[Iterable[str]] = frozenset()
    #: What it does, in a sentence: how the assistants that may ask it or hand a chat to
    #: it (``delegates``, ``handoffs``) are told about it.
    description: ClassVar[str] = ""
    #: Ids of assistants it may ask for help: each becomes a tool ``ask_<id>(request)``
    #: that runs that assistant as a sub-run and returns its answer
    #: (``agent_app.agents.teamwork``).
    delegates: ClassVar[Sequence[str]] = ()
    #: Ids of assistants it may hand the chat to: each becomes a tool
    #: ``transfer_to_<id>(reason)``; that assistant answers the rest of the turn and the
    #: chat is its from then on.
    handoffs: ClassVar[Sequence[str]] = ()
    #: Prompts a new, empty chat offers as buttons (each sends its text as the first
    #: message); none: the empty chat just invites a first message.
    starter_prompts: ClassVar[Sequence[str]] = ()
    #: Offer the tool ``handoff_to_human(reason)``: the assistant can ask a person of the
    #: team to take the chat over (``agent_app.people``; docs/support.md).
    handoff: ClassVar[bool] = False

    @property
    def display_name(self) -> str:
        return self.name or self.id

    def get_instructions(self, chat: ChatSession | None) -> str:
        """The system prompt of ``chat``'s agent (built once per chat and process)."""
        return self.instructions

    def get_model(self) -> AgentModel:
        """The model answering for this assistant."""
        from agent_app.assistants.llm import resolve_model

        if self.model is None or isinstance(self.model, str):
            return resolve_model(self.model)
        return self.model

    def get_tools(self) -> list[AgentTool]:
        return list(self.tools)

    def get_browser_tools(self) -> list[AgentTool]:
        return list(self.browser_tools)

    def get_extensions(self) -> list[AgentExtension]:
        return list(self.extensions)

    def mcp_headers(self, server: MCPServer, user: Any) -> Mapping[str, str] | None:
        """The headers of ``user``'s own connection to the HTTP MCP ``server`` (added to the
        server's own), or None when the server needs no credentials of theirs.

        Called once per request and server, in a thread (the ORM may be used). Headers
        given here make the connection the person's alone; with None, everyone shares one.
        """
        return None

    def has_permission(self, user: Any) -> bool:
        """Whether ``user`` (a user or ``AnonymousUser``) may chat with this assistant."""
        if self.permission_required is None:
            return True
        return bool(user is not None and user.has_perm(self.permission_required))

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} {self.id!r}>"


def _label(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class AssistantRegistry:
    """The registered assistants, by id, in the order they were registered."""

    def __init__(self) -> None:
        self._assistants: dict[str, Assistant] = {}

    def register(self, cls: A) -> A:
        """Register ``cls`` (an ``Assistant`` subclass); returns it, so it decorates."""
        if not (isinstance(cls, type) and issubclass(cls, Assistant)):
            raise ImproperlyConfigured(f"{cls!r} is not an Assistant subclass")
        assistant_id = cls.__dict__.get("id", getattr(cls, "id", None))
        if not isinstance(assistant_id, str) or not assistant_id:
            raise ImproperlyConfigured(f"Assistant {_label(cls)} has no id: set id = '<name>'")
        if not ID_PATTERN.fullmatch(assistant_id):
            raise ImproperlyConfigured(
                f"Assistant {_label(cls)} has id {assistant_id!r}: use 1 to 64 of a-z 0-9 _ -"
            )
        existing = self._assistants.get(assistant_id)
        if existing is not None and _label(type(existing)) != _label(cls):
            raise ImproperlyConfigured(
                f"Two assistants have the id {assistant_id!r}: {_label(type(existing))} "
                f"and {_label(cls)}"
            )
        self._assistants[assistant_id] = cls()
        return cls

    def unregister(self, assistant_id: str) -> None:
        self._assistants.pop(assistant_id, None)

    def swap(self, assistant_id: str, assistant: Assistant) -> Assistant:
        """Put ``assistant`` in the place of the one registered as ``assistant_id`` (same
        id, same order); returns the one it replaced (``agent_app.testing``'s overrides)."""
        previous = self._assistants.get(assistant_id)
        if previous is None:
            raise UnknownAssistant(assistant_id)
        self._assistants[assistant_id] = assistant
        return previous

    def get(self, assistant_id: str) -> Assistant | None:
        """The assistant registered as ``assistant_id``; None when there is none."""
        return self._assistants.get(assistant_id)

    def all(self) -> list[Assistant]:
        return list(self._assistants.values())

    def ids(self) -> list[str]:
        return list(self._assistants)

    def display_name_of(self, assistant_id: str) -> str:
        """The name people see for a chat bound to ``assistant_id`` ("": the default), or
        the id itself when no assistant is registered under it."""
        found = self._assistants.get(assistant_id or self.default_id() or "")
        return found.display_name if found is not None else assistant_id

    def for_user(self, user: Any) -> list[Assistant]:
        """The assistants ``user`` may chat with."""
        return [
            assistant for assistant in self._assistants.values() if assistant.has_permission(user)
        ]

    def reply_names(self) -> frozenset[str]:
        """The external event names clients may send besides the app's own replies: every
        assistant's ``reply_names`` and ``ZETT_CLIENT_REPLY_NAMES``."""
        names = set(conf.ZETT_CLIENT_REPLY_NAMES)
        for assistant in self._assistants.values():
            names.update(assistant.reply_names)
        return frozenset(names)

    def default_id(self) -> str | None:
        """``ZETT_DEFAULT_ASSISTANT``, else the first registered; None when none is."""
        configured = conf.ZETT_DEFAULT_ASSISTANT
        if configured:
            return configured
        return next(iter(self._assistants), None)

    def resolve(self, assistant_id: str | None) -> Assistant:
        """The assistant of a chat bound to ``assistant_id`` ("" or None: the default)."""
        wanted = assistant_id or self.default_id()
        if wanted is None:
            raise ImproperlyConfigured(
                "No assistant is registered: declare one in an installed app's assistants.py "
                "or in ZETT_ASSISTANTS"
            )
        assistant = self._assistants.get(wanted)
        if assistant is None:
            raise UnknownAssistant(wanted)
        return assistant

    def discover(self) -> None:
        """Import every installed app's ``assistants`` module and ``ZETT_ASSISTANTS``."""
        autodiscover_modules("assistants")
        paths = conf.ZETT_ASSISTANTS
        if isinstance(paths, str) or not isinstance(paths, list | tuple):
            raise ImproperlyConfigured(
                f"ZETT_ASSISTANTS must be a list of dotted paths, got {paths!r}"
            )
        for path in paths:
            try:
                cls = import_string(path)
            except ImportError as error:
                raise ImproperlyConfigured(
                    f"ZETT_ASSISTANTS: cannot import {path!r}: {error}"
                ) from error
            self.register(cls)


#: The process's assistants.
registry = AssistantRegistry()


def register(cls: A) -> A:
    """Class decorator: register an ``Assistant`` subclass in ``registry``."""
    return registry.register(cls)


class AssistantForbidden(PermissionError):
    """The person may not chat with this assistant (``has_permission`` said no)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """What a run's top reads of its chat (``read_entry``)."""

    chat: ChatSession
    assistant: Assistant
    #: Whether the chat's person may use its assistant.
    allowed: bool
    #: Whether the chat holds a document (``agent_app.attachments.reading.has_documents``).
    documents: bool


def read_entry(session_id: str) -> Entry:
    """The chat with its owner, its assistant and what the run's top checks (in the ORM's
    thread). A run that stores its start reads the same with the chat's row instead
    (``entry_returning``, ``entry_from``): no statement of its own, in the same hop."""
    from agent_app.models import ChatSession
    from agent_app.models.statements import get_joined

    chat = get_joined(ChatSession, "owner", session_id)  # select_related("owner").get(pk=…)
    assistant = registry.resolve(chat.assistant)
    allowed = assistant.has_permission(person_of_chat(chat))
    return Entry(chat, assistant, allowed, allowed and has_documents(session_id))


def entry_returning() -> tuple[str, tuple[Any, ...]]:
    """What ``read_entry`` reads of a chat, as expressions of the statement that locks its
    row as a run is stored (``begin_run``'s ``also``), and their parameters: the chat's
    columns and whether it holds a document. ``entry_from`` makes the ``Entry`` of them."""
    return _entry_sql(default_connection().vendor), (documents_parameter(),)


@functools.cache
def _entry_sql(vendor: str) -> str:
    """``entry_returning``'s expressions on one backend (built once)."""
    from agent_app.models import ChatSession
    from agent_app.models.statements import returned_columns

    meta, quote = ChatSession._meta, default_connection().ops.quote_name
    key = f"{quote(meta.db_table)}.{quote(meta.pk.column)}"
    return f"{returned_columns(ChatSession, vendor).sql}, {documents_exists_sql(vendor, key)}"


def entry_from(values: Sequence[Any], title: str) -> Entry:
    """``read_entry``'s ``Entry`` of the values ``entry_returning`` read; ``title``: the
    chat's title as the run's start left it (a new chat is named after its message in
    the same transaction, after its row was read). The owner, if any, is read here."""
    from agent_app.models import ChatSession
    from agent_app.models.statements import instance_from

    chat = instance_from(ChatSession, values[:-1])
    chat.title = title
    assistant = registry.resolve(chat.assistant)
    allowed = assistant.has_permission(person_of_chat(chat))
    return Entry(chat, assistant, allowed, allowed and bool(values[-1]))


async def enter_run(session_id: str, entry: Entry | Exception | None = None) -> ChatSession:
    """Bind the chat and its person to the calling task (the run's); check the permission.

    ``AssistantForbidden`` when the owner may not use the chat's assistant (any more).
    ``entry``: ``read_entry(session_id)`` read just before, or what it raised (raised
    here); None: read now. Whether the chat holds a document is kept for the run
    (``agent_app.attachments.reading.noted_documents``).
    """
    if entry is None:
        entry = await database_sync_to_async(read_entry)(session_id)
    elif isinstance(entry, Exception):
        raise entry
    if not entry.allowed:
        name = entry.assistant.display_name
        raise AssistantForbidden(f"You may not chat with the assistant {name!r}")
    bind(person_of_chat(entry.chat), entry.chat)
    note_documents(session_id, entry.documents)
    return entry.chat
