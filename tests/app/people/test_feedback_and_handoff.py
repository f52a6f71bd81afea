"""Feedback on answers (socket and HTTP), asking for a person, the handoff tool, the inbox."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from agent_app.assistants import registry
from agent_app.models import ChatFeedback, ChatMessage, ChatSession
from agent_app.people.signals import feedback_saved, handoff_requested
from tests.app.llm_doubles import call_tool, say
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def heard():
    """The people signals sent during the test: ``[(name, kwargs)]``."""
    calls: list[tuple[str, dict]] = []

    def on_handoff(sender, **kwargs):
        calls.append(("handoff_requested", kwargs))

    def on_feedback(sender, **kwargs):
        calls.append(("feedback_saved", kwargs))

    handoff_requested.connect(on_handoff, weak=False)
    feedback_saved.connect(on_feedback, weak=False)
    yield calls
    handoff_requested.disconnect(on_handoff)
    feedback_saved.disconnect(on_feedback)


async def _answered(sockets, use_model, text: str = "Here you go.") -> tuple[object, dict]:
    """A socket on a chat with one answer, and that answer's history item (with its id)."""
    use_model(ScriptedModel([say(text)]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()
    again = await sockets(socket.session_id)
    answer = again.session_frame["history"][-1]
    assert answer["role"] == "assistant" and isinstance(answer["id"], int)
    return socket, answer


# --- feedback ------------------------------------------------------------------------------


async def test_feedback_is_one_per_person_per_answer_and_can_change(sockets, use_model, heard):
    socket, answer = await _answered(sockets, use_model)
    await socket.send({"type": "feedback", "message_id": answer["id"], "rating": "up"})
    saved = await socket.expect("feedback_saved", message_id=answer["id"], rating="up")
    assert saved["comment"] == ""
    await socket.send(
        {"type": "feedback", "message_id": answer["id"], "rating": "down", "comment": "Wrong"}
    )
    await socket.expect("feedback_saved", rating="down", comment="Wrong")
    rows = [row async for row in ChatFeedback.objects.all()]
    assert [(row.message_id, row.rating, row.comment) for row in rows] == [
        (answer["id"], "down", "Wrong")
    ]
    assert rows[0].assistant == "demo"
    assert [(name, kwargs["created"]) for name, kwargs in heard] == [
        ("feedback_saved", True),
        ("feedback_saved", False),
    ]


async def test_bad_feedback_frames_are_refused(sockets, use_model, browser_cookie):
    socket, answer = await _answered(sockets, use_model)
    for frame in (
        {"type": "feedback", "message_id": answer["id"], "rating": "meh"},
        {"type": "feedback", "message_id": "x", "rating": "up"},
        {"type": "feedback", "rating": "up"},
        {"type": "feedback", "message_id": answer["id"], "rating": "up", "comment": "x" * 4001},
    ):
        await socket.send(frame)
        await socket.expect_error("bad_frame")
    # The user's own message is no answer; another person's answer does not exist for them.
    question = await ChatMessage.objects.filter(role="user").afirst()
    await socket.send({"type": "feedback", "message_id": question.pk, "rating": "up"})
    await socket.expect_error("bad_frame")
    stranger = await sockets(cookie=await browser_cookie())
    await stranger.send({"type": "feedback", "message_id": answer["id"], "rating": "down"})
    await stranger.expect_error("bad_frame")
    assert await ChatFeedback.objects.acount() == 0


def _post(client: Client, message_id: int, body: object) -> tuple[int, dict]:
    response = client.post(
        f"/api/messages/{message_id}/feedback/",
        data=json.dumps(body),
        content_type="application/json",
    )
    return response.status_code, response.json()


async def test_feedback_over_http(sockets, use_model, login_cookie, django_user_model):
    user, cookie = await login_cookie("carol")
    use_model(ScriptedModel([say("An answer.")]))
    socket = await sockets(cookie=cookie)
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()
    answer = await ChatMessage.objects.filter(role="assistant").afirst()

    def exchange() -> list[tuple[int, dict]]:
        owner, other = Client(), Client()
        owner.force_login(user)
        other.force_login(django_user_model.objects.create_user("dave", password="unused-pw"))
        return [
            _post(owner, answer.pk, {"rating": "up"}),
            _post(owner, answer.pk, {"rating": "down", "comment": "Too long"}),
            _post(owner, answer.pk, {"rating": "sideways"}),
            _post(owner, answer.pk, ["up"]),
            _post(other, answer.pk, {"rating": "up"}),
            _post(owner, 10**9, {"rating": "up"}),
        ]

    answers = await sync_to_async(exchange)()
    assert [status for status, _ in answers] == [201, 200, 400, 400, 404, 404]
    assert answers[1][1]["rating"] == "down" and answers[1][1]["comment"] == "Too long"
    assert await ChatFeedback.objects.acount() == 1


# --- asking for a person -------------------------------------------------------------------


async def test_talk_to_a_person_marks_the_chat_and_tells_every_socket(
    sockets, use_model, heard, settings
):
    settings.ZETT_SUPPORT_HOURS = "Mon-Fri, 9:00-17:00 CET"
    socket, _ = await _answered(sockets, use_model)
    other = await sockets(socket.session_id)
    await socket.send({"type": "request_human", "reason": "I want a refund"})
    for each in (socket, other):
        frame = await each.expect("handoff_requested", reason="I want a refund")
        assert frame["source"] == "customer" and frame["hours"] == "Mon-Fri, 9:00-17:00 CET"
    chat = await ChatSession.objects.aget(pk=socket.session_id)
    assert chat.needs_human and chat.handoff_reason == "I want a refund"
    assert [(name, kwargs["source"]) for name, kwargs in heard] == [
        ("handoff_requested", "customer")
    ]
    reloaded = await sockets(socket.session_id)
    assert reloaded.session_frame["support"]["needs_human"] is True
    # An empty chat has nobody to hand over to.
    empty = await sockets()
    await empty.send({"type": "request_human"})
    await empty.expect_error("bad_frame")


async def test_an_assistant_with_handoff_can_ask_for_a_person(
    sockets, use_model, heard, monkeypatch
):
    monkeypatch.setattr(type(registry.resolve(None)), "handoff", True, raising=False)
    model = use_model(
        ScriptedModel(
            [
                call_tool("handoff_to_human", reason="Customer is upset about a refund"),
                say("A person from our team will join you here."),
            ]
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Let me talk to a human!"})
    frames = await socket.run_to_completion()
    asked = [frame for frame in frames if frame["type"] == "handoff_requested"]
    assert len(asked) == 1
    assert asked[0]["reason"] == "Customer is upset about a refund"
    assert asked[0]["source"] == "assistant"
    seqs = [frame["seq"] for frame in frames if "seq" in frame]
    assert seqs == sorted(seqs)  # numbered within the run, in order
    chat = await ChatSession.objects.aget(pk=socket.session_id)
    assert chat.needs_human
    assert [name for name, _ in heard] == ["handoff_requested"]
    assert model is not None


async def test_assistants_without_handoff_do_not_get_the_tool(sockets, use_model):
    model = use_model(ScriptedModel([say("Hello.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "hi"})
    await socket.run_to_completion()
    assert "handoff_to_human" not in [tool.name for tool in model.requests[0].tools]


async def test_an_answer_just_streamed_is_rated_by_its_run(sockets, use_model):
    """The page has no id for an answer it just streamed: it names the run instead."""
    use_model(ScriptedModel([call_tool("calculate", expression="1+1"), say("It is 2.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "1+1?"})
    frames = await socket.run_to_completion()
    request_id = frames[0]["request_id"]
    await socket.send({"type": "feedback", "request_id": request_id, "rating": "up"})
    saved = await socket.expect("feedback_saved", rating="up")
    answer = await ChatMessage.objects.aget(pk=saved["message_id"])
    assert answer.role == "assistant" and answer.content == "It is 2."  # the last answer
    await socket.send({"type": "feedback", "request_id": "no-such-run", "rating": "up"})
    await socket.expect_error("bad_frame")
    await socket.send(
        {"type": "feedback", "request_id": request_id, "message_id": answer.pk, "rating": "up"}
    )
    await socket.expect_error("bad_frame")  # one or the other
