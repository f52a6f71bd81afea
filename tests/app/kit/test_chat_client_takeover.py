"""``ChatClient`` in a chat a member of staff has taken over: a message is stored for them
and starts no run, so ``send`` returns at once with ``status`` ``stored``."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agent_app.testing import text

pytestmark = pytest.mark.django_db(transaction=True)


async def test_send_in_a_taken_over_chat_returns_once_the_message_is_stored(
    sockets, script_model, zett_chat, login_cookie
):
    model = script_model([text("Hello."), text("I am back.")])
    chat = await zett_chat(timeout=5)
    await chat.send("hello")
    user, cookie = await login_cookie("alice")

    def grant() -> None:
        from django.contrib.auth.models import Permission

        user.user_permissions.add(Permission.objects.get(codename="staff_chat"))

    await sync_to_async(grant)()
    staff = await sockets(chat.id, cookie=cookie)
    await staff.send({"type": "takeover"})
    await staff.until(lambda frame: frame["type"] == "taken_over")

    await chat.send("are you there?")

    assert chat.status == "stored"
    assert chat.frames[-1]["type"] == "customer_message"
    assert chat.frames[-1]["content"] == "are you there?"
    assert model.calls == 1  # no run started: the model was not asked
    assert chat.answer_text == "Hello."  # the last answer is still the assistant's

    await staff.send({"type": "staff_message", "content": "Yes, Alice here."})
    await staff.until(lambda frame: frame["type"] == "staff_message")
    await staff.send({"type": "hand_back"})
    await staff.until(lambda frame: frame["type"] == "handed_back")
    await chat.send("thanks")
    assert (chat.status, chat.answer_text) == ("completed", "I am back.")
