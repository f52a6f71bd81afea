"""Assistants (agent_app.assistants): the registry, a chat's choice, who is chatting, who may.

Registration errors are checked on a registry of their own; the socket tests register
assistants of their own in the process registry (and take them out again), with the
scripted model of ``use_model`` answering for all of them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from agent_app.assistants import (
    Assistant,
    AssistantRegistry,
    current_chat,
    current_user,
    register,
    registry,
)
from agent_app.models import ChatSession
from tests.app.conftest import answer_of
from tests.app.llm_doubles import call_tool, say
from zett_agent.extensions.base import AgentExtension
from zett_agent.testing import ScriptedModel
from zett_agent.tools.base import tool

pytestmark = pytest.mark.django_db(transaction=True)

#: What the tools, the hook and the model saw, in order: ``(where, username, chat id)``.
SEEN: list[tuple[str, str, str]] = []


def _note(where: str) -> None:
    user, chat = current_user(), current_chat()
    SEEN.append((where, user.get_username() or "anonymous", str(chat.pk)))


@tool(guidelines=["Use when asked who is chatting."])
async def who_async() -> str:
    """Say who is chatting (async)."""
    _note("async tool")
    return current_user().get_username() or "anonymous"


@tool(guidelines=["Use when asked who is chatting."])
def who_sync() -> str:
    """Say who is chatting (sync, in a worker thread)."""
    _note("sync tool")
    return current_user().get_username() or "anonymous"


class SeeingHook(AgentExtension):
    async def before_model(self, context: Any, request: Any) -> None:
        _note("hook")


class SeeingModel(ScriptedModel):
    async def stream(self, request):
        _note("model")
        async for event in super().stream(request):
            yield event


class Helper(Assistant):
    id = "helper"
    name = "Helper"
    instructions = "You help."
    tools = [who_async, who_sync]
    extensions = [SeeingHook()]


class Staff(Assistant):
    id = "staff"
    name = "Staff desk"
    instructions = "You help staff."
    permission_required = "agent_app.view_chatsession"


@pytest.fixture
def assistants():
    """Register Helper and Staff for one test (the demo assistant stays the default)."""
    SEEN.clear()
    register(Helper)
    register(Staff)
    yield
    registry.unregister("helper")
    registry.unregister("staff")


# --- declaring ------------------------------------------------------------------------------


def test_a_class_without_id_is_refused_with_its_name():
    class Nameless(Assistant):
        name = "No id"

    with pytest.raises(ImproperlyConfigured, match=r"test_assistants.*Nameless has no id"):
        AssistantRegistry().register(Nameless)


def test_an_id_that_is_not_a_slug_is_refused():
    class Shouting(Assistant):
        id = "Big Desk"

    with pytest.raises(ImproperlyConfigured, match="'Big Desk'"):
        AssistantRegistry().register(Shouting)


def test_two_assistants_with_one_id_fail_naming_both():
    class First(Assistant):
        id = "desk"

    class Second(Assistant):
        id = "desk"

    assistants = AssistantRegistry()
    assistants.register(First)
    with pytest.raises(ImproperlyConfigured) as refused:
        assistants.register(Second)
    assert "First" in str(refused.value) and "Second" in str(refused.value)
    assert "'desk'" in str(refused.value)


def test_the_registry_gets_lists_and_filters_by_permission(assistants, django_user_model):
    assert registry.get("helper").name == "Helper"
    assert registry.get("nobody") is None
    assert [a.id for a in registry.all()][:1] == ["demo"]
    assert {"demo", "helper", "staff"} <= {a.id for a in registry.all()}
    plain = django_user_model.objects.create_user("plain")
    staff = django_user_model.objects.create_user("boss")
    staff.user_permissions.add(Permission.objects.get(codename="view_chatsession"))
    staff = django_user_model.objects.get(pk=staff.pk)  # no cached permissions
    assert "staff" not in {a.id for a in registry.for_user(plain)}
    assert "staff" in {a.id for a in registry.for_user(staff)}


def test_zett_assistants_registers_dotted_paths(settings):
    settings.ZETT_ASSISTANTS = ["tests.app.test_assistants.Helper"]
    assistants = AssistantRegistry()
    assistants.discover()
    assert assistants.get("helper") is not None
    settings.ZETT_ASSISTANTS = ["tests.app.test_assistants.Missing"]
    with pytest.raises(ImproperlyConfigured, match="Missing"):
        AssistantRegistry().discover()


# --- a chat's assistant ---------------------------------------------------------------------


async def test_a_new_chat_takes_the_assistant_its_first_message_names(
    sockets, use_model, assistants
):
    use_model(ScriptedModel([say("Hello from the helper.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi", "assistant": "helper"})
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Hello from the helper."
    chat = await ChatSession.objects.aget(pk=socket.session_id)
    assert chat.assistant == "helper"


async def test_a_chat_that_names_none_gets_the_default(sockets, use_model, assistants):
    use_model(ScriptedModel([say("Hi.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi"})
    await socket.run_to_completion()
    assert (await ChatSession.objects.aget(pk=socket.session_id)).assistant == "demo"


async def test_an_unknown_assistant_is_refused_and_stores_nothing(sockets, use_model):
    use_model(ScriptedModel([say("Hi.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi", "assistant": "nobody"})
    error = await socket.expect_error("unknown_assistant")
    assert "'nobody'" in error["message"]
    assert not await ChatSession.objects.filter(pk=socket.session_id).aexists()


async def test_a_stored_chat_keeps_its_assistant(sockets, use_model, assistants):
    use_model(ScriptedModel([say("One."), say("Two.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi", "assistant": "helper"})
    await socket.run_to_completion()
    await socket.send({"type": "user_message", "content": "Again", "assistant": "demo"})
    await socket.run_to_completion()
    assert (await ChatSession.objects.aget(pk=socket.session_id)).assistant == "helper"


# --- who is chatting ------------------------------------------------------------------------


async def test_tools_hooks_and_the_model_know_the_person_and_the_chat(
    sockets, use_model, assistants, login_cookie
):
    use_model(SeeingModel([call_tool("who_async", "c1"), call_tool("who_sync", "c2"), say("ok")]))
    _, cookie = await login_cookie("ada")
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Who am I?", "assistant": "helper"})
    frames = await socket.run_to_completion()
    results = [
        frame["event"]["message"]["content"]
        for frame in frames
        if frame["type"] == "agent_event" and frame["event"]["type"] == "tool_completed"
    ]
    assert results == ["ada", "ada"]
    chat = socket.session_id
    assert ("async tool", "ada", chat) in SEEN and ("sync tool", "ada", chat) in SEEN
    assert ("hook", "ada", chat) in SEEN and ("model", "ada", chat) in SEEN
    assert {entry[1:] for entry in SEEN} == {("ada", chat)}


async def test_an_anonymous_person_is_the_anonymous_user(sockets, use_model, assistants):
    use_model(SeeingModel([call_tool("who_async"), say("ok")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Who?", "assistant": "helper"})
    await socket.run_to_completion()
    assert ("async tool", "anonymous", socket.session_id) in SEEN


def test_outside_a_run_there_is_no_person():
    with pytest.raises(LookupError, match="inside a run"):
        current_user()


# --- who may ------------------------------------------------------------------------------


async def test_creating_a_chat_needs_the_assistants_permission(
    sockets, use_model, assistants, login_cookie
):
    use_model(ScriptedModel([say("Hi.")]))
    _, cookie = await login_cookie("plain")
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Hi", "assistant": "staff"})
    error = await socket.expect_error("forbidden")
    assert "Staff desk" in error["message"]
    assert not await ChatSession.objects.filter(pk=socket.session_id).aexists()


async def test_losing_the_permission_closes_the_chat_at_the_socket_and_the_run(
    sockets, use_model, assistants, login_cookie
):
    use_model(ScriptedModel([say("Welcome."), say("never")]))
    user, cookie = await login_cookie("boss")
    permission = await Permission.objects.aget(codename="view_chatsession")
    await user.user_permissions.aadd(permission)
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Hi", "assistant": "staff"})
    assert answer_of(await socket.run_to_completion()) == "Welcome."
    await user.user_permissions.aremove(permission)
    # A run started now (by this socket, still open) fails before the model is asked.
    await socket.send({"type": "user_message", "content": "Again"})
    failed = await socket.until(lambda frame: frame["type"] in ("run_failed", "run_completed"))
    assert failed[-1]["type"] == "run_failed"
    assert "Staff desk" in failed[-1]["error"]["message"]
    # A new socket on the chat is refused.
    again = await sockets(session_id=socket.session_id, cookie=cookie, expect_session=False)
    if again.connected:
        await again.expect_error("forbidden")


async def test_a_run_reads_its_chat_in_the_thread_hop_that_stores_it(
    sockets, use_model, assistants, login_cookie, monkeypatch
):
    """``enter_run`` gets what ``begin_run``'s hop read after storing the run: no hop of
    its own (its fallback, ``read_entry`` in its own hop, is never taken)."""
    import agent_app.assistants

    own_hops = []
    monkeypatch.setattr(agent_app.assistants, "read_entry", own_hops.append)
    use_model(SeeingModel([call_tool("who_async", "c1"), say("ok")]))
    _, cookie = await login_cookie("ada")
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "Who am I?", "assistant": "helper"})
    assert answer_of(await socket.run_to_completion()) == "ok"
    assert ("async tool", "ada", socket.session_id) in SEEN
    assert own_hops == []


async def test_enter_run_given_nothing_reads_the_entry_itself_alike(django_user_model):
    from channels.db import database_sync_to_async

    from agent_app.assistants import enter_run, read_entry

    user = await django_user_model.objects.acreate(username="lin")
    chat = await ChatSession.objects.acreate(owner=user)
    session_id = str(chat.pk)

    async def bound(entry=None):
        found = await enter_run(session_id, entry)
        return found.pk, found.owner, current_user()

    handed = await asyncio.create_task(bound(await database_sync_to_async(read_entry)(session_id)))
    assert await asyncio.create_task(bound()) == handed == (chat.pk, user, user)


async def test_a_run_whose_chat_cannot_be_read_fails_at_its_top_and_the_chat_goes_on(
    sockets, use_model, monkeypatch
):
    import agent_app.sessions.settling

    def unreadable(values: object, title: str) -> None:
        raise RuntimeError("the database went away")

    model = use_model(ScriptedModel([say("Back.")]))
    socket = await sockets()
    with monkeypatch.context() as patched:
        patched.setattr(agent_app.sessions.settling, "entry_from", unreadable)
        await socket.send({"type": "user_message", "content": "Hi"})
        failed = await socket.until(lambda frame: frame["type"] in ("run_failed", "run_completed"))
    assert failed[-1]["type"] == "run_failed"
    assert model.requests == []  # it failed before the model was asked
    await socket.send({"type": "user_message", "content": "Again"})
    assert answer_of(await socket.run_to_completion()) == "Back."


# --- the pages ------------------------------------------------------------------------------


def test_the_chat_page_passes_its_assistant_and_offers_the_persons_assistants(assistants):
    client = Client()
    page = client.get("/s/00000000-0000-4000-8000-000000000001/?assistant=helper")
    assert page.status_code == 200
    assert page.context["chat_config"]["assistant"] == "helper"
    html = page.content.decode()
    assert "?assistant=helper" in html and "?assistant=demo" in html
    assert "?assistant=staff" not in html  # anonymous visitors may not use it
    assert client.get("/s/00000000-0000-4000-8000-000000000001/?assistant=nobody").status_code == (
        404
    )


def test_the_list_and_the_chat_page_show_which_assistant_a_chat_talks_to(
    assistants, django_user_model
):
    user = django_user_model.objects.create_user("ada")
    chat = ChatSession.objects.create(owner=user, title="Shoes", assistant="helper")
    chat.messages.create(position=0, role="user", content="hi")
    client = Client()
    client.force_login(user)
    assert "Helper" in client.get("/").content.decode()
    assert "Helper" in client.get(f"/s/{chat.pk}/").content.decode()


def test_check_names_an_approval_tool_the_assistant_lacks_and_an_unknown_default(settings):
    from agent_app.checks import check_assistants, check_setting_types

    class Careless(Assistant):
        id = "careless"
        tools = [who_async]
        approval_required = {"refund_order"}

    register(Careless)
    try:
        messages = [error.msg for error in check_assistants()]
    finally:
        registry.unregister("careless")
    assert any("'careless'" in msg and "'refund_order'" in msg for msg in messages), messages
    settings.ZETT_DEFAULT_ASSISTANT = "nobody"
    assert any("'nobody'" in error.msg for error in check_assistants())
    settings.ZETT_HISTORY_PAGE = "fifty"
    settings.ZETT_WEBSOCKET_PATH = "/ws"
    found = " ".join(error.msg for error in check_setting_types())
    assert "ZETT_HISTORY_PAGE" in found and "ZETT_WEBSOCKET_PATH" in found


async def test_an_assistant_can_open_the_socket_to_reply_names_of_its_own(
    sockets, use_model, assistants
):
    use_model(ScriptedModel([say("Hi.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi", "assistant": "helper"})
    await socket.run_to_completion()
    reply = {"type": "external_event", "name": "pick_color", "payload": {"color": "red"}}
    await socket.send(reply)
    refused = await socket.expect("external_event_result", accepted_by=[])
    assert refused["reason"] == "not_allowed"

    class Painter(Assistant):
        id = "painter"
        reply_names = {"pick_color"}

    register(Painter)
    try:
        await socket.send(reply)
        passed = await socket.expect("external_event_result", accepted_by=[])
        assert passed["reason"] != "not_allowed"  # past the gate: nothing waits for it now
    finally:
        registry.unregister("painter")
