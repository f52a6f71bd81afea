"""The plugin's fixtures: ``script_model`` answers for the assistants until the test ends,
``zett_chat`` gives connected clients and closes them."""

from __future__ import annotations

from agent_app.assistants import registry
from agent_app.testing import ScriptModel, call, text


async def test_a_scripted_chat_with_the_fixtures(desk, script_model, zett_chat, django_user_model):
    alice = await django_user_model.objects.acreate(username="alice")
    model = script_model([call("whoami"), text("Hello alice.")], assistant="kit-desk")
    chat = await zett_chat(user=alice, assistant="kit-desk")
    await chat.send("Who am I?")
    assert chat.answer_text == "Hello alice."
    assert model.calls == 2 and isinstance(registry.get("kit-desk").get_model(), ScriptModel)


def test_script_model_without_an_assistant_answers_for_every_one(desk, script_model):
    model = script_model([text("hi")])
    assert {a.id: a.get_model() for a in registry.all()} == dict.fromkeys(registry.ids(), model)
