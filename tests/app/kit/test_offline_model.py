"""The offline demo model (``ZETT_MODEL = "demo"``) calls a project's own tools when a
message names them: the tool runs as the person chatting, its approval is asked."""

from __future__ import annotations

import pytest

from agent_app.testing import ChatClient, override_assistant

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_message_naming_a_tool_calls_it_as_the_person_chatting(
    desk, django_user_model, settings
):
    settings.ZETT_DEMO_PACE = 0
    alice = await django_user_model.objects.acreate(username="alice")
    with override_assistant("kit-desk", model="demo"):
        async with ChatClient(user=alice, assistant="kit-desk") as chat:
            await chat.send("whoami")
            assert chat.answer_text == "The whoami tool returned: alice"
            await chat.send("Please refund order 7")
            (wait,) = chat.pending
            assert (wait["tool"], wait["payload"]["arguments"]) == ("refund", {"order": 7})
            await chat.approve()
            assert chat.answer_text == "The refund tool returned: Refunded order 7."
            await chat.send("hello")
            assert "`whoami`, `refund`, `stock`" in chat.answer_text
    assert desk == ["refund 7 for alice"]
