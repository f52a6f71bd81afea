"""API tokens (agent_app.guard.tokens): issued by a command, presented as a bearer header."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.management import CommandError, call_command
from django.utils import timezone

from agent_app.guard.tokens import issue
from agent_app.models import ApiToken, ChatSession
from tests.app.conftest import answer_of
from tests.app.llm_doubles import say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


def bearer(secret: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {secret}".encode())]


@sync_to_async
def token_of(username: str, **options):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username, password="unused-pw")
    return user, *issue(user, **options)


def test_create_prints_the_secret_once_and_stores_only_its_hash(django_user_model):
    django_user_model.objects.create_user("robot")
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "zett_token", "create", "robot", "--name", "CI", "--days", "30", stdout=out, stderr=err
    )
    secret = out.getvalue().strip()
    token = ApiToken.objects.get()
    assert secret.startswith("zett_") and len(secret) > 40
    assert token.name == "CI" and token.user.username == "robot"
    assert secret not in {token.key_hash, token.prefix} and token.prefix == secret[:12]
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    assert "shown only now" in err.getvalue()
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("zett_token", "create", "nobody", stdout=io.StringIO())
    call_command("zett_token", "revoke", str(token.pk), stdout=io.StringIO())
    assert ApiToken.objects.get().revoked
    with pytest.raises(CommandError, match="no token"):
        call_command("zett_token", "revoke", "999", stdout=io.StringIO())


async def test_a_program_with_a_token_chats_as_its_user(sockets, use_model):
    use_model(ScriptedModel([say("Hello, robot.")]))
    user, _, secret = await token_of("robot")
    socket = await sockets(cookie="", origin="", headers=bearer(secret))
    assert socket.connected
    await socket.send({"type": "user_message", "content": "Hi"})
    assert answer_of(await socket.run_to_completion()) == "Hello, robot."
    chat = await ChatSession.objects.aget(pk=socket.session_id)
    assert chat.owner_id == user.pk


@pytest.mark.parametrize("problem", ["wrong", "revoked", "expired", "inactive", "deleted", "basic"])
async def test_a_bad_token_is_refused_at_the_handshake(sockets, use_model, problem):
    use_model(ScriptedModel())
    user, token, secret = await token_of("robot", days=1)
    if problem == "wrong":
        secret = secret[:-2] + ("aa" if not secret.endswith("aa") else "bb")
    elif problem == "revoked":
        await ApiToken.objects.filter(pk=token.pk).aupdate(revoked=True)
    elif problem == "expired":
        await ApiToken.objects.filter(pk=token.pk).aupdate(expires_at=timezone.now())
    elif problem == "inactive":
        user.is_active = False
        await user.asave()
    elif problem == "deleted":
        await user.adelete()
    headers = [(b"authorization", f"Basic {secret}".encode())] if problem == "basic" else None
    socket = await sockets(cookie="", origin="", headers=headers or bearer(secret))
    assert not socket.connected


async def test_a_token_in_the_query_string_is_never_accepted(use_model):
    from zett_site.asgi import application

    use_model(ScriptedModel())
    _, _, secret = await token_of("robot")
    for name in ("token", "access_token", "bearer"):
        communicator = WebsocketCommunicator(
            application, f"/ws/sessions/{uuid.uuid4()}/?{name}={secret}"
        )
        connected, _ = await communicator.connect()
        assert connected  # accepted only to say why it closes: no identity
        frame = await communicator.receive_json_from()
        assert frame["type"] == "error" and frame["code"] == "forbidden"
        await communicator.wait()


async def test_last_used_is_written_at_most_once_a_minute(sockets, use_model):
    use_model(ScriptedModel())
    _, token, secret = await token_of("robot")
    first = await sockets(cookie="", origin="", headers=bearer(secret))
    used = (await ApiToken.objects.aget(pk=token.pk)).last_used_at
    assert first.connected and used is not None
    second = await sockets(cookie="", origin="", headers=bearer(secret))
    assert second.connected
    assert (await ApiToken.objects.aget(pk=token.pk)).last_used_at == used
    await ApiToken.objects.filter(pk=token.pk).aupdate(last_used_at=used - timedelta(seconds=61))
    third = await sockets(cookie="", origin="", headers=bearer(secret))
    assert third.connected
    assert (await ApiToken.objects.aget(pk=token.pk)).last_used_at > used


def test_adding_a_token_in_the_admin_shows_its_secret_once(admin_client, django_user_model):
    robot = django_user_model.objects.create_user("robot")
    response = admin_client.post(
        "/admin/agent_app/apitoken/add/",
        {"user": robot.pk, "name": "from the admin", "expires_at_0": "", "expires_at_1": ""},
        follow=True,
    )
    assert response.status_code == 200
    (message,) = [str(m) for m in response.context["messages"] if "secret" in str(m)]
    secret = message.rsplit(" ", 1)[-1]
    token = ApiToken.objects.get()
    assert secret.startswith("zett_") and token.prefix == secret[:12]
    assert token.name == "from the admin" and token.user == robot
    from agent_app.guard.tokens import user_of_secret

    assert user_of_secret(secret) == robot
    listing = admin_client.get("/admin/agent_app/apitoken/").content.decode()
    assert secret not in listing and token.prefix in listing


async def test_a_revoked_tokens_socket_is_told_and_closed_with_4401(sockets, use_model):
    from agent_app.guard.token_watch import token_watch

    use_model(ScriptedModel())
    _, token, secret = await token_of("robot")
    _, other, other_secret = await token_of("robin")
    socket = await sockets(cookie="", origin="", headers=bearer(secret))
    bystander = await sockets(cookie="", origin="", headers=bearer(other_secret))
    assert socket.connected and token_watch().token_ids == {token.pk, other.pk}
    await ApiToken.objects.filter(pk=token.pk).aupdate(revoked=True)
    await token_watch().check()
    await socket.expect_error("forbidden")
    assert (await socket.communicator.receive_output(timeout=5))["code"] == 4401
    await socket.close()
    await bystander.assert_quiet()  # another token's socket is untouched
    assert token_watch().token_ids == {other.pk}
    await bystander.close()
    assert token_watch().token_ids == set()  # nothing watched, no task left


def test_a_secret_reads_its_token_and_user_as_the_orm_does(django_user_model):
    from agent_app.guard.tokens import TokenRefused, token_of_secret

    user = django_user_model.objects.create_user("reader", password="unused-pw")
    token, secret = issue(user, name="reads", days=2)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    read = token_of_secret(secret)
    orm = ApiToken.objects.select_related("user").get(pk=token.pk)
    for field in ApiToken._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(orm, field.attname), field.name
    for field in django_user_model._meta.concrete_fields:
        assert getattr(read.user, field.attname) == getattr(orm.user, field.attname), field.name
    assert read.user == user and read.expires_at > timezone.now()
    with pytest.raises(TokenRefused):
        token_of_secret(secret + "x")
