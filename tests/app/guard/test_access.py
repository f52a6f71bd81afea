"""Whose chat is it: the access matrix over the list page, the chat page, the socket and
the admin, for the owner and for everyone else (agent_app.guard.access; docs/security.md).

Visitors: the owner, another signed-in user, another anonymous browser, a client with no
cookie at all, and the owner after signing out (with the cookie they had, replayed, and
with the one they got after). Each sees their own chats only; for everyone else a chat
that exists does not: 404 for the page, ``forbidden`` (close code 4403) for the socket.
"""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from agent_app.guard.access import BROWSER_KEY_FIELD
from agent_app.models import ChatMessage, ChatSession, ExternalEventRecord
from tests.app.llm_doubles import call_tool, say
from zett_agent.testing import ScriptedModel
from zett_site.models import Note

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Hashing a password the production way takes a second: too slow for these tests."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


LIST_URL = reverse("agent_app:session_list")
PASSWORD = "pw-for-tests-only"
VISITORS = ["other_user", "other_browser", "no_cookie", "signed_out", "signed_out_replayed"]


def chat_url(session_id) -> str:
    return reverse("agent_app:chat", kwargs={"session_id": session_id})


def cookie_of(client: Client) -> str:
    morsel = client.cookies.get("sessionid")
    return f"sessionid={morsel.value}" if morsel is not None and morsel.value else ""


@sync_to_async
def world(owner_kind: str) -> dict:
    """An owner (a user, or an anonymous browser) with one stored chat, and the visitors."""
    users = get_user_model().objects
    owner = Client()
    if owner_kind == "user":
        user = users.create_user("owner", password=PASSWORD)
        owner.force_login(user)
        session = ChatSession.objects.create(title="Owner's secret plans", owner=user)
    else:
        owner.get(LIST_URL)
        key = owner.session[BROWSER_KEY_FIELD]
        session = ChatSession.objects.create(title="Owner's secret plans", browser_key=key)
    ChatMessage.objects.create(session=session, position=0, role="user", content="secret")

    other_user = Client()
    other_user.force_login(users.create_user("stranger", password=PASSWORD))
    other_browser = Client()
    other_browser.get(LIST_URL)
    visitors = {"owner": owner, "other_user": other_user, "other_browser": other_browser}
    visitors["no_cookie"] = Client()
    if owner_kind == "user":
        leaving = Client()
        leaving.force_login(user)
        replayed = cookie_of(leaving)
        leaving.post(reverse("logout"))
        visitors["signed_out"] = leaving
        visitors["signed_out_replayed"] = replayed
    else:
        # An anonymous owner cannot sign out; their stand-ins are two more strangers.
        visitors["signed_out"] = Client()
        visitors["signed_out_replayed"] = ""
    return {"session": session, "visitors": visitors}


def as_client(visitor) -> Client:
    return visitor if isinstance(visitor, Client) else Client()


def visitor_cookie(visitor) -> str:
    return cookie_of(visitor) if isinstance(visitor, Client) else visitor


# --- pages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("owner_kind", ["user", "browser"])
async def test_the_owner_lists_opens_and_connects(owner_kind, sockets, use_model):
    use_model(ScriptedModel())
    setup = await world(owner_kind)
    session, owner = setup["session"], setup["visitors"]["owner"]
    listing = await sync_to_async(owner.get)(LIST_URL)
    assert [s.pk for s in listing.context["sessions"]] == [session.pk]
    assert (await sync_to_async(owner.get)(chat_url(session.pk))).status_code == 200
    socket = await sockets(str(session.pk), cookie=cookie_of(owner))
    assert [m["content"] for m in socket.session_frame["history"]] == ["secret"]


@pytest.mark.parametrize("owner_kind", ["user", "browser"])
@pytest.mark.parametrize("visitor", VISITORS)
async def test_nobody_else_lists_opens_or_connects(owner_kind, visitor, sockets, use_model):
    use_model(ScriptedModel([say("never")]))
    setup = await world(owner_kind)
    session, who = setup["session"], setup["visitors"][visitor]
    client = as_client(who)
    listing = await sync_to_async(client.get)(LIST_URL)
    assert "secret plans" not in listing.content.decode()
    assert list(listing.context["sessions"]) == []
    assert (await sync_to_async(client.get)(chat_url(session.pk))).status_code == 404

    socket = await sockets(str(session.pk), cookie=visitor_cookie(who), expect_session=False)
    await socket.expect_error("forbidden")
    assert await socket.communicator.receive_output(timeout=10) == {
        "type": "websocket.close",
        "code": 4403,
    }
    assert await ChatMessage.objects.filter(session=session).acount() == 1


@pytest.mark.parametrize("visitor", ["no_cookie", "signed_out_replayed"])
async def test_a_socket_with_no_identity_cannot_even_open_a_new_chat(visitor, sockets, use_model):
    use_model(ScriptedModel([say("never")]))
    who = (await world("user"))["visitors"][visitor]
    socket = await sockets(cookie=visitor_cookie(who), expect_session=False)
    error = await socket.expect_error("forbidden")
    assert "Sign in" in error["message"]
    assert not await ChatSession.objects.filter(pk=socket.session_id).aexists()


@pytest.mark.parametrize("visitor", ["owner", *VISITORS])
def test_the_admin_is_for_staff_only(visitor, client):
    setup = async_to_sync(world)("user")
    session, who = setup["session"], as_client(setup["visitors"][visitor])
    pages = [
        reverse("admin:agent_app_chatsession_changelist"),
        reverse("admin:agent_app_chatsession_change", args=[session.pk]),
    ]
    for page in pages:
        response = who.get(page)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))
    staff = get_user_model().objects.create_superuser("boss", "boss@example.com", PASSWORD)
    client.force_login(staff)
    for page in pages:
        assert client.get(page).status_code == 200


# --- signing in and out ----------------------------------------------------------------------


async def test_signing_out_closes_the_users_sockets(sockets, use_model):
    use_model(ScriptedModel())
    users = get_user_model().objects
    user = await sync_to_async(users.create_user)("ada", password=PASSWORD)
    tab = Client()
    await sync_to_async(tab.force_login)(user)
    first = await sockets(cookie=cookie_of(tab))
    second = await sockets(cookie=cookie_of(tab))
    bystander = await sockets()  # another browser's socket stays open
    await sync_to_async(tab.post)(reverse("logout"))
    for socket in (first, second):
        await socket.expect_error("forbidden")
        assert await socket.communicator.receive_output(timeout=10) == {
            "type": "websocket.close",
            "code": 4403,
        }
    await bystander.assert_quiet()
    await sync_to_async(tab.get)(LIST_URL)  # the next page makes it an anonymous browser
    again = await sockets(first.session_id, cookie=cookie_of(tab))
    assert again.session_frame["history"] == []


async def test_a_signed_out_socket_is_closed_and_its_run_goes_on_untouched(sockets, use_model):
    from agent_app.guard.limits import limiter
    from agent_app.sessions.registry import live_sessions

    use_model(ScriptedModel([call_tool("save_note", "n-1", title="T", text="x"), say("ok")]))
    user = await sync_to_async(get_user_model().objects.create_user)("ada", password=PASSWORD)
    tab = Client()
    await sync_to_async(tab.force_login)(user)
    socket = await sockets(cookie=cookie_of(tab))
    await socket.send({"type": "user_message", "content": "save it"})
    await socket.until_event("custom", "approval_requested")
    await sync_to_async(tab.post)(reverse("logout"))
    await socket.expect_error("forbidden")
    # The socket is gone; the run (a session's, not a socket's) still waits for its answer.
    (live,) = live_sessions()
    assert live.sockets == [] and live.active_request_id is not None
    assert limiter().open_sockets() == 0
    assert not await Note.objects.aexists()


async def test_with_login_required_anonymous_sockets_are_forbidden(sockets, use_model, settings):
    use_model(ScriptedModel())
    settings.ZETT_REQUIRE_LOGIN = True
    socket = await sockets(expect_session=False)
    await socket.expect_error("forbidden")
    user = await sync_to_async(get_user_model().objects.create_user)("ada", password=PASSWORD)
    tab = Client()
    await sync_to_async(tab.force_login)(user)
    assert (await sockets(cookie=cookie_of(tab))).connected


def test_deleting_a_user_deletes_their_chats():
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    session = ChatSession.objects.create(owner=user)
    ChatMessage.objects.create(session=session, position=0, role="user", content="mine")
    ExternalEventRecord.objects.create(session=session, name="approval_response")

    user.delete()

    assert not ChatSession.objects.exists()
    assert not ChatMessage.objects.exists()
    assert not ExternalEventRecord.objects.exists()


# --- chats not stored yet --------------------------------------------------------------------


async def test_a_chat_is_stored_by_its_first_message_and_owned_by_its_sender(
    sockets, use_model, browser_cookie
):
    use_model(ScriptedModel([say("Hello.")]))
    mine = await sockets()
    assert not await ChatSession.objects.filter(pk=mine.session_id).aexists()
    await mine.send({"type": "user_message", "content": "hi"})
    await mine.run_to_completion()
    stored = await ChatSession.objects.aget(pk=mine.session_id)
    assert stored.owner_id is None and stored.browser_key
    stranger = await sockets(mine.session_id, cookie=await browser_cookie(), expect_session=False)
    await stranger.expect_error("forbidden")


async def test_a_second_person_cannot_share_an_unstored_chat(sockets, use_model, browser_cookie):
    use_model(ScriptedModel([say("For the first person only.")]))
    first = await sockets()
    second = await sockets(first.session_id, cookie=await browser_cookie(), expect_session=False)
    await second.expect_error("forbidden")
    await first.send({"type": "user_message", "content": "hi"})
    await first.run_to_completion()
    await first.close()
    # The claim ends with the first person's last socket; the row now says whose it is.
    third = await sockets(first.session_id, cookie=await browser_cookie(), expect_session=False)
    await third.expect_error("forbidden")


async def test_opening_many_new_chats_stores_nothing(sockets, use_model):
    use_model(ScriptedModel())
    for _ in range(30):
        socket = await sockets(origin="")
        await socket.close()
    assert await ChatSession.objects.acount() == 0


def test_an_id_that_is_not_a_uuid_is_not_a_chat(client):
    assert client.get(f"/s/{uuid.uuid4().hex[:10]}/").status_code == 404


async def test_deleting_a_user_closes_their_sockets(sockets, use_model):
    use_model(ScriptedModel())
    user = await sync_to_async(get_user_model().objects.create_user)("ada", password=PASSWORD)
    tab = Client()
    await sync_to_async(tab.force_login)(user)
    socket = await sockets(cookie=cookie_of(tab))
    await sync_to_async(user.delete)()
    await socket.expect_error("forbidden")
    assert await socket.communicator.receive_output(timeout=10) == {
        "type": "websocket.close",
        "code": 4403,
    }
