"""Staff take a chat over, over the real ASGI app: two sockets (staff, customer), races.

The customer is an anonymous browser (the default cookie of ``sockets``); the member of
staff is a signed-in user holding ``agent_app.staff_chat``. The model streams without end
until the takeover cancels it, so the takeover lands in the middle of an answer.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async

from agent_app.models import ChatMessage, ChatSession, ChatTakeover
from tests.app.conftest import rows
from zett_agent.messages import AgentMessage, AssistantMessage
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse

pytestmark = pytest.mark.django_db(transaction=True)


class StreamThenAnswer:
    """First call: text deltas until cancelled. Later calls: ``"Back again."`` at once."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self.streaming = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if len(self.requests) == 1:
            self.streaming.set()
            while True:
                yield ModelEvent.text("x")
                await asyncio.sleep(0)
        answer = AssistantMessage(content="Back again.")
        yield ModelEvent.text("Back again.")
        yield ModelEvent.completed(ModelResponse(answer))


@pytest.fixture
def staff_cookie(login_cookie):
    """``await staff_cookie(name) -> (user, cookie)``: a signed-in member of staff."""

    async def make(username: str = "alice"):
        user, cookie = await login_cookie(username)

        def grant() -> None:
            from django.contrib.auth.models import Permission

            user.first_name = username.title()
            user.save()
            user.user_permissions.add(Permission.objects.get(codename="staff_chat"))

        await sync_to_async(grant)()
        return user, cookie

    return make


def text_deltas(frames: list[dict]) -> list[dict]:
    return [
        frame
        for frame in frames
        if frame["type"] == "agent_event" and frame["event"]["type"] == "text_delta"
    ]


async def _until_quiet(socket) -> list[dict]:
    """Every frame up to the ``pong`` of a ping sent now: all that was on its way."""
    await socket.send({"type": "ping"})
    return await socket.until(lambda frame: frame["type"] == "pong")


async def _streaming_chat(sockets, staff_cookie, model, deltas: int = 3):
    """A customer socket and a staff socket on one chat whose answer streams now."""
    customer = await sockets()
    await customer.send({"type": "user_message", "content": "I need help with my order"})
    await customer.expect("run_started")
    _, cookie = await staff_cookie()
    staff = await sockets(customer.session_id, cookie=cookie)
    seen = 0
    while seen < deltas:  # the answer is streaming: some of it has reached the customer
        frame = await customer.receive()
        seen += frame["type"] == "agent_event" and frame["event"]["type"] == "text_delta"
    return customer, staff


async def test_takeover_cancels_the_streaming_answer_and_no_text_follows(
    sockets, use_model, staff_cookie
):
    model = use_model(StreamThenAnswer())
    customer, staff = await _streaming_chat(sockets, staff_cookie, model)
    await staff.send({"type": "takeover"})
    for socket in (customer, staff):
        frames = await socket.until(lambda frame: frame["type"] == "taken_over")
        assert [f["type"] for f in frames].count("run_cancelled") == 1
        taken = frames[-1]
        assert taken["staff"] == {"name": "Alice"} and taken["seq"] > frames[-2]["seq"]
        assert text_deltas(await _until_quiet(socket)) == []
    # The partial answer is kept; the chat says who answers now.
    stored = await rows(customer.session_id)
    assert stored[-1][0] == "assistant" and stored[-1][1].startswith("x")
    chat = await ChatSession.objects.aget(pk=customer.session_id)
    assert chat.taken_over_at is not None and not chat.needs_human
    assert await ChatTakeover.objects.filter(session_id=chat.pk, ended_at=None).acount() == 1


@pytest.mark.slow
async def test_a_hundred_takeovers_at_random_moments_leave_no_late_text(
    sockets, use_model, staff_cookie, settings
):
    """The takeover lands at a random point of the stream, 100 times: 0 late deltas."""
    settings.ZETT_MAX_CHATS_PER_HOUR = 1000
    settings.ZETT_WS_RATE_LIMIT = {"burst": 1000, "per_second": 1000.0}
    late = 0
    randomness = random.Random(40)
    _, cookie = await staff_cookie()
    for _ in range(100):
        use_model(StreamThenAnswer())
        customer = await sockets()
        await customer.send({"type": "user_message", "content": "hello"})
        await customer.expect("run_started")
        staff = await sockets(customer.session_id, cookie=cookie)
        for _ in range(randomness.randrange(0, 40)):
            await customer.receive()
        await staff.send({"type": "takeover"})
        for socket in (customer, staff):
            await socket.until(lambda frame: frame["type"] == "taken_over")
            late += len(text_deltas(await _until_quiet(socket)))
        await customer.close()
        await staff.close()
    assert late == 0


async def test_messages_while_taken_over_start_no_run_and_reach_staff(
    sockets, use_model, staff_cookie
):
    model = use_model(StreamThenAnswer())
    customer, staff = await _streaming_chat(sockets, staff_cookie, model)
    await staff.send({"type": "takeover"})
    for socket in (customer, staff):
        await socket.until(lambda frame: frame["type"] == "taken_over")

    await customer.send({"type": "user_message", "content": "Is anyone there?"})
    for socket in (customer, staff):
        shown = await socket.expect("customer_message", content="Is anyone there?")
        assert isinstance(shown["id"], int)
    await staff.send({"type": "staff_message", "content": "Hi, I'm Alice. Let me look."})
    for socket in (customer, staff):
        said = await socket.expect("staff_message", content="Hi, I'm Alice. Let me look.")
        assert said["staff"] == {"name": "Alice"} and said["position"] > shown["position"]
    assert len(model.requests) == 1  # nothing asked the model since the takeover
    stored = await rows(customer.session_id)
    assert stored[-2:] == [("user", "Is anyone there?"), ("staff", "Hi, I'm Alice. Let me look.")]
    # A reload shows it: role ``staff`` in history, and who answers now.
    again = await sockets(customer.session_id)
    history = again.session_frame["history"]
    assert history[-1]["role"] == "staff" and history[-1]["staff"] == {"name": "Alice"}
    assert history[-1]["id"] == said["id"]
    assert again.session_frame["support"]["taken_over"] is True
    assert again.session_frame["support"]["staff"] == {"name": "Alice"}
    # Regenerating while a person answers is refused, and nothing is superseded.
    await customer.send({"type": "regenerate"})
    await customer.expect_error("busy")
    assert await rows(customer.session_id) == stored


async def test_hand_back_then_the_assistant_answers_and_reads_the_staff_words(
    sockets, use_model, staff_cookie
):
    model = use_model(StreamThenAnswer())
    customer, staff = await _streaming_chat(sockets, staff_cookie, model)
    await staff.send({"type": "takeover"})
    await staff.until(lambda frame: frame["type"] == "taken_over")
    await staff.send({"type": "staff_message", "content": "Your refund is on its way."})
    await staff.expect("staff_message")
    await staff.send({"type": "hand_back"})
    for socket in (customer, staff):
        await socket.until(lambda frame: frame["type"] == "handed_back")

    await customer.send({"type": "user_message", "content": "Thanks! One more question."})
    frames = await customer.run_to_completion()
    assert frames[0]["type"] == "run_started"
    assert frames[-1]["event"]["message"]["content"] == "Back again."
    said = [m for m in model.requests[-1].messages if isinstance(m, AgentMessage)]
    assert len(said) == 1
    assert "Alice" in said[0].content and "Your refund is on its way." in said[0].content
    chat = await ChatSession.objects.aget(pk=customer.session_id)
    assert chat.taken_over_at is None
    assert await ChatTakeover.objects.filter(ended_at=None).acount() == 0
    # Handing back twice: the second says there is nothing to hand back.
    await staff.send({"type": "hand_back"})
    await staff.until(lambda frame: frame["type"] == "error")


async def test_staff_frames_from_anyone_else_are_forbidden(sockets, use_model, login_cookie):
    use_model(StreamThenAnswer())
    customer = await sockets()
    for frame in (
        {"type": "takeover"},
        {"type": "staff_message", "content": "I am staff, honest"},
        {"type": "hand_back"},
    ):
        await customer.send(frame)
        await customer.expect_error("forbidden")
    _, cookie = await login_cookie("mallory")
    other = await sockets(cookie=cookie)  # a signed-in user without the permission
    await other.send({"type": "takeover"})
    await other.expect_error("forbidden")
    assert await ChatSession.objects.filter(taken_over_at__isnull=False).acount() == 0


async def test_non_staff_cannot_open_someone_elses_chat_and_staff_watch_read_only(
    sockets, use_model, staff_cookie, login_cookie
):
    model = use_model(StreamThenAnswer())
    customer, staff = await _streaming_chat(sockets, staff_cookie, model)
    _, cookie = await login_cookie("mallory")
    intruder = await sockets(customer.session_id, cookie=cookie, expect_session=False)
    await intruder.expect_error("forbidden")
    # Staff watching may not write as the customer, stop the answer or rate it.
    for frame in (
        {"type": "user_message", "content": "hi"},
        {"type": "cancel"},
        {"type": "request_human"},
    ):
        await staff.send(frame)
        await staff.until(lambda f: f["type"] == "error" and f["code"] == "forbidden")
    # Writing before taking over is refused too: take the chat over first.
    await staff.send({"type": "takeover"})
    await staff.until(lambda frame: frame["type"] == "taken_over")


async def test_staff_message_needs_a_takeover_first(sockets, use_model, staff_cookie):
    model = use_model(StreamThenAnswer())
    customer, staff = await _streaming_chat(sockets, staff_cookie, model)
    await customer.send({"type": "cancel"})
    await customer.until(lambda frame: frame["type"] == "run_cancelled")
    await staff.send({"type": "staff_message", "content": "hello"})
    await staff.until(lambda f: f["type"] == "error" and f["code"] == "bad_frame")
    assert await ChatMessage.objects.filter(role="staff").acount() == 0


async def test_a_message_racing_the_takeover_is_never_lost_nor_answered_after_it(
    sockets, use_model, staff_cookie, settings
):
    """Message and takeover sent together, 30 times: the message is stored once, and it
    either started a run that the takeover cancelled, or it waits for the person."""
    settings.ZETT_MAX_CHATS_PER_HOUR = 1000
    settings.ZETT_WS_RATE_LIMIT = {"burst": 1000, "per_second": 1000.0}
    _, cookie = await staff_cookie()
    outcomes = set()
    for round_ in range(30):
        use_model(StreamThenAnswer())
        customer = await sockets()
        await customer.send({"type": "user_message", "content": "first"})
        await customer.until(lambda frame: frame["type"] == "run_started")
        await customer.send({"type": "cancel"})
        await customer.until(lambda frame: frame["type"] == "run_cancelled")
        staff = await sockets(customer.session_id, cookie=cookie)
        text = f"second {round_}"
        await asyncio.gather(
            customer.send({"type": "user_message", "content": text}),
            staff.send({"type": "takeover"}),
        )
        seen: dict[str, list[dict]] = {}
        for socket, name in ((customer, "customer"), (staff, "staff")):
            # Until the takeover and the message's own fate: stored for the person, or a
            # run (cancelled by the takeover).
            frames: list[dict] = []
            while not (
                any(f["type"] == "taken_over" for f in frames)
                and any(
                    f["type"] in ("customer_message", "run_started") and f.get("content") == text
                    for f in frames
                )
            ):
                frames.append(await socket.receive())
            seen[name] = frames + await _until_quiet(socket)
        for frames in seen.values():
            kinds = [frame["type"] for frame in frames]
            taken = kinds.index("taken_over")
            if "run_started" in kinds:  # the run came first: cancelled before the takeover
                assert kinds.index("run_started") < kinds.index("run_cancelled") < taken
                outcomes.add("cancelled")
            else:  # stored for the person (its frame may even precede ``taken_over``)
                assert kinds.count("customer_message") == 1
                outcomes.add("kept for the person")
            assert text_deltas(frames[taken:]) == []
        stored = [content for role, content in await rows(customer.session_id) if role == "user"]
        assert stored.count(text) == 1
        await customer.close()
        await staff.close()
    assert outcomes  # which of the two happened varies; either is right


async def test_files_sent_while_taken_over_are_kept_with_the_message(
    sockets, use_model, staff_cookie, settings, tmp_path
):
    from tests.app.test_attachments_chat import Browser
    from tests.app.test_attachments_files import image_bytes

    settings.MEDIA_ROOT = str(tmp_path)
    model = use_model(StreamThenAnswer())
    customer, staff = await _streaming_chat(sockets, staff_cookie, model)
    await staff.send({"type": "takeover"})
    await customer.until(lambda frame: frame["type"] == "taken_over")
    visitor = Browser(dict(customer.communicator.scope["headers"])[b"cookie"].decode(), sockets)
    uploaded = await visitor.upload(customer.session_id, image_bytes(), "label.png")
    await customer.send(
        {"type": "user_message", "content": "Here is the label", "attachments": [uploaded["id"]]}
    )
    for socket in (customer, staff):
        shown = await socket.until(lambda frame: frame["type"] == "customer_message")
        assert [ref["id"] for ref in shown[-1]["attachments"]] == [uploaded["id"]]
    stored = await ChatMessage.objects.filter(role="user").order_by("-position").afirst()
    assert stored.extra["attributes"]["attachments"] == [uploaded["id"]]
    again = await sockets(customer.session_id)
    assert again.session_frame["history"][-1]["attachments"][0]["name"] == "label.png"


async def test_taking_the_permission_away_works_on_an_open_socket(sockets, use_model, staff_cookie):
    model = use_model(StreamThenAnswer())
    _, staff = await _streaming_chat(sockets, staff_cookie, model)
    await staff.send({"type": "takeover"})
    await staff.until(lambda frame: frame["type"] == "taken_over")

    def revoke() -> None:
        from django.contrib.auth.models import User

        User.objects.get(username="alice").user_permissions.clear()

    await sync_to_async(revoke)()
    await staff.send({"type": "staff_message", "content": "still here?"})
    await staff.expect_error("forbidden")
    assert await ChatMessage.objects.filter(role="staff").acount() == 0
