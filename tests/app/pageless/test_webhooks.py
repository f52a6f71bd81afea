"""Webhooks: the outbox written in the event's transaction, Standard Webhooks signatures
checked by an HMAC written here (and by the reference package), retries against a real
HTTP server that fails first, and the addresses a webhook may not call.

The receiver is a real HTTP server on 127.0.0.1 (``tests.app.pageless.receiver``), so
these tests allow private addresses; the refusal of them is tested with the setting off.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as ReferenceVerifier

from agent_app import conf
from agent_app.models import DeliveryStatus, Webhook, WebhookDelivery
from agent_app.models.webhooks import new_secret
from agent_app.webhooks.delivery import CLAIM_MARGIN, Deliverer
from agent_app.webhooks.events import emit
from tests.app.llm_doubles import call_tool, say
from tests.app.pageless.receiver import Receiver
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def allow_private(settings):
    settings.ZETT_WEBHOOK_ALLOW_PRIVATE = True
    settings.ZETT_WEBHOOK_RETRIES = [0, 0, 0]


def verify_by_hand(secret: str, headers: dict[str, str], body: bytes) -> None:
    """The Standard Webhooks check, written out: HMAC-SHA256 of "id.timestamp.body"."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    versions = dict(part.split(",", 1) for part in headers["webhook-signature"].split())
    assert hmac.compare_digest(versions["v1"], expected)
    ReferenceVerifier(secret).verify(body, headers)


def add_hook(url: str, events: str = "run.completed,run.failed,run.waiting") -> Webhook:
    hook = Webhook(url=url, events=events)
    hook.full_clean()
    hook.save()
    return hook


def emit_in_transaction(event: str, data: dict) -> int:
    with transaction.atomic():
        return emit(event, data)


async def test_a_message_is_signed_as_standard_webhooks_says(allow_private):
    async with Receiver() as receiver:
        hook = await sync_to_async(add_hook)(receiver.url, "feedback.created")
        queued = await sync_to_async(emit_in_transaction)(
            "feedback.created", {"chat_id": "c1", "rating": "down"}
        )
        assert queued == 1
        assert await Deliverer().deliver_due() == 1
        [got] = await receiver.wait_for(1)
    verify_by_hand(hook.secret, got.headers, got.body)
    assert got.path == "/hooks/zett?src=test"
    assert got.headers["content-type"] == "application/json"
    assert got.headers["webhook-id"].startswith("msg_")
    body = json.loads(got.body)
    assert body["type"] == "feedback.created"
    assert body["data"] == {"chat_id": "c1", "rating": "down"}
    assert body["timestamp"].endswith("Z")
    row = await WebhookDelivery.objects.aget()
    assert (row.status, row.attempts, row.last_status) == (DeliveryStatus.DELIVERED, 1, 200)


async def test_a_failing_receiver_gets_the_same_message_id_again_until_it_takes_it(
    allow_private,
):
    async with Receiver(statuses=[500, 503]) as receiver:
        hook = await sync_to_async(add_hook)(receiver.url, "run.failed")
        await sync_to_async(emit_in_transaction)("run.failed", {"request_id": "r1"})
        deliverer = Deliverer()
        deliverer.start()
        try:
            attempts = await receiver.wait_for(3)
            await deliverer.recorded(3)
        finally:
            await deliverer.stop()
    assert len({got.headers["webhook-id"] for got in attempts}) == 1
    assert len({got.body for got in attempts}) == 1
    for got in attempts:
        verify_by_hand(hook.secret, got.headers, got.body)
    row = await WebhookDelivery.objects.aget()
    assert (row.status, row.attempts) == (DeliveryStatus.DELIVERED, 3)
    assert [entry["status"] for entry in row.log] == [500, 503, 200]


async def test_a_delivery_is_given_up_after_the_last_retry(allow_private, settings):
    settings.ZETT_WEBHOOK_RETRIES = [0]
    async with Receiver(statuses=[500, 502, 200]) as receiver:
        await sync_to_async(add_hook)(receiver.url, "run.failed")
        await sync_to_async(emit_in_transaction)("run.failed", {"request_id": "r1"})
        deliverer = Deliverer()
        assert await deliverer.deliver_due() == 1
        assert await deliverer.deliver_due() == 1
        assert await deliverer.deliver_due() == 0
        assert len(receiver.requests) == 2
    row = await WebhookDelivery.objects.aget()
    assert (row.status, row.attempts, row.last_status) == (DeliveryStatus.FAILED, 2, 502)


def test_the_first_retry_comes_within_30_seconds_and_the_retries_back_off():
    retries = conf.DEFAULTS["ZETT_WEBHOOK_RETRIES"]
    assert retries[0] <= 30
    assert retries == sorted(retries) and len(retries) >= 5


async def test_an_attempt_whose_worker_died_is_made_again_with_the_same_id(allow_private):
    """A claim lapses: a worker that died mid-attempt left its row claimed; once the
    attempt's deadline has passed, another worker makes the next attempt."""
    async with Receiver() as receiver:
        await sync_to_async(add_hook)(receiver.url, "run.failed")
        await sync_to_async(emit_in_transaction)("run.failed", {"request_id": "r1"})
        from agent_app.webhooks.delivery import claim_due

        [dead] = await sync_to_async(claim_due)(timezone.now())  # then the worker "died"
        assert await Deliverer().deliver_due() == 0  # still claimed
        later = timezone.now() + timedelta(seconds=conf.ZETT_WEBHOOK_TIMEOUT + CLAIM_MARGIN + 1)
        [again] = await sync_to_async(claim_due)(later)
        assert (again.message_id, again.attempt) == (dead.message_id, 2)


def test_an_event_rolled_back_is_never_queued(allow_private):
    add_hook("http://127.0.0.1:9/x", "run.failed")
    with pytest.raises(RuntimeError), transaction.atomic():
        emit("run.failed", {"request_id": "r1"})
        raise RuntimeError("the change failed")
    assert not WebhookDelivery.objects.exists()


def test_only_the_webhooks_that_asked_for_an_event_get_it(allow_private):
    wants = add_hook("http://127.0.0.1:9/a", "run.completed")
    add_hook("http://127.0.0.1:9/b", "run.failed")
    off = add_hook("http://127.0.0.1:9/c", "run.completed")
    off.active = False
    off.save()
    assert emit("run.completed", {"request_id": "r1"}) == 1
    assert list(WebhookDelivery.objects.values_list("webhook_id", flat=True)) == [wants.pk]
    with pytest.raises(ValueError, match="Unknown webhook event"):
        emit("run.exploded", {})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://localhost:8000/hook",
        "https://10.0.0.5/hook",
        "http://192.168.1.20/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://100.64.0.1/hook",
        "http://0.0.0.0/hook",
        "http://[::ffff:127.0.0.1]/hook",
    ],
)
def test_a_private_or_loopback_address_is_refused(url):
    hook = Webhook(url=url, events="run.completed")
    with pytest.raises(ValidationError) as refused:
        hook.full_clean()
    assert "private or loopback" in refused.value.message_dict["url"][0]


def test_other_urls_and_secrets_are_checked_too():
    for url, words in [
        ("ftp://example.com/x", "https://"),
        ("http://user:pw@93.184.215.14/x", "no user name"),
    ]:
        with pytest.raises(ValidationError) as refused:
            Webhook(url=url, events="run.completed").full_clean()
        assert words in " ".join(refused.value.message_dict["url"])
    with pytest.raises(ValidationError) as refused:
        Webhook(url="https://93.184.215.14/x", events="run.done", secret="abc").full_clean()
    assert set(refused.value.message_dict) == {"events", "secret"}
    Webhook(url="https://93.184.215.14/x", events="run.completed").full_clean()


async def test_a_delivery_to_a_private_address_is_refused_when_it_is_sent(settings):
    """An address checked when it was saved is checked again at each attempt."""
    async with Receiver() as receiver:
        settings.ZETT_WEBHOOK_ALLOW_PRIVATE = True
        await sync_to_async(add_hook)(receiver.url, "run.failed")
        settings.ZETT_WEBHOOK_ALLOW_PRIVATE = False
        await sync_to_async(emit_in_transaction)("run.failed", {"request_id": "r1"})
        assert await Deliverer().deliver_due() == 1
        assert receiver.requests == []
    row = await WebhookDelivery.objects.aget()
    assert row.status == DeliveryStatus.PENDING and "private or loopback" in row.last_error


async def test_a_run_sends_run_waiting_when_its_approval_opens_then_run_completed(
    allow_private, sockets, use_model
):
    use_model(ScriptedModel([call_tool("save_note", "note-1", title="T", text="x"), say("Saved.")]))
    async with Receiver() as receiver:
        hook = await sync_to_async(add_hook)(receiver.url)
        deliverer = Deliverer()
        deliverer.start()
        try:
            socket = await sockets()
            await socket.send({"type": "user_message", "content": "Note this"})
            frames = await socket.until_event("custom", "approval_requested")
            [waiting] = await receiver.wait_for(1)
            payload = frames[-1]["event"]["payload"]
            reply = {"tool_call_id": "note-1", "approved": True, "digest": payload["digest"]}
            await socket.send(
                {"type": "external_event", "name": "approval_response", "payload": reply}
            )
            await socket.run_to_completion()
            _, completed = await receiver.wait_for(2)
            await deliverer.recorded(2)
        finally:
            await deliverer.stop()
    for got in (waiting, completed):
        verify_by_hand(hook.secret, got.headers, got.body)
    waiting_body, completed_body = json.loads(waiting.body), json.loads(completed.body)
    assert waiting_body["type"] == "run.waiting"
    data = waiting_body["data"]
    assert (data["chat_id"], data["assistant"], data["status"]) == (
        socket.session_id,
        "demo",
        "waiting",
    )
    [pending] = data["pending"]
    assert (pending["kind"], pending["tool_call_id"]) == ("approval", "note-1")
    assert completed_body["type"] == "run.completed"
    done = completed_body["data"]
    assert (done["request_id"], done["answer"], done["status"]) == (
        data["request_id"],
        "Saved.",
        "completed",
    )
    assert done["error"] is None and "input_tokens" in done["usage"]


async def test_a_failed_run_sends_run_failed_with_its_error(allow_private, sockets, use_model):
    def fail(request):
        raise RuntimeError("the provider is down")

    use_model(ScriptedModel([fail]))
    hook = await sync_to_async(add_hook)("http://127.0.0.1:9/x", "run.failed")
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hello"})
    await socket.until_event("run_failed")
    row = await WebhookDelivery.objects.aget(webhook=hook)
    body = json.loads(row.body)
    assert body["type"] == "run.failed"
    assert body["data"]["status"] == "failed"
    assert body["data"]["error"] == {"type": "RuntimeError", "message": "the provider is down"}


def test_manage_py_zett_webhook_adds_lists_and_removes(allow_private, capsys):
    call_command(
        "zett_webhook", "add", "http://127.0.0.1:9/x", "--events", "run.failed,run.waiting"
    )
    out = capsys.readouterr().out
    hook = Webhook.objects.get()
    assert hook.secret in out and hook.secret.startswith("whsec_")
    assert hook.events == ["run.failed", "run.waiting"]
    secret = new_secret()
    call_command("zett_webhook", "add", "http://127.0.0.1:9/y", "--events", "feedback.created",
                 "--secret", secret)  # fmt: skip
    assert Webhook.objects.get(url__endswith="/y").secret == secret
    call_command("zett_webhook", "list")
    assert "/x" in capsys.readouterr().out
    call_command("zett_webhook", "remove", str(hook.pk))
    assert Webhook.objects.count() == 1
    with pytest.raises(CommandError, match="Unknown webhook event"):
        call_command("zett_webhook", "add", "http://127.0.0.1:9/z", "--events", "run.done")


def test_manage_py_zett_webhook_takes_events_as_separate_words(allow_private):
    call_command("zett_webhook", "add", "http://127.0.0.1:9/x", "--events", "run.completed",
                 "chat.handoff_requested", "--secret", new_secret())  # fmt: skip
    assert Webhook.objects.get().events == ["run.completed", "chat.handoff_requested"]


def test_manage_py_zett_webhook_refuses_a_private_address(settings):
    settings.ZETT_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(CommandError, match="private or loopback"):
        call_command("zett_webhook", "add", "http://127.0.0.1:9/x", "--events", "run.failed")
    assert not Webhook.objects.exists()


def test_the_admin_lists_webhooks_and_their_deliveries(admin_client, allow_private):
    hook = add_hook("http://127.0.0.1:9/x", "run.failed")
    emit("run.failed", {"request_id": str(uuid.uuid4())})
    for url in (
        "/admin/agent_app/webhook/",
        f"/admin/agent_app/webhook/{hook.pk}/change/",
        "/admin/agent_app/webhookdelivery/",
        f"/admin/agent_app/webhookdelivery/{WebhookDelivery.objects.get().pk}/change/",
        "/admin/agent_app/scheduledrun/",
        "/admin/agent_app/scheduledrun/add/",
    ):
        assert admin_client.get(url).status_code == 200, url


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("ZETT_WEBHOOK_TIMEOUT", 0, "zett.E060"),
        ("ZETT_WEBHOOK_RETRIES", [5, -1], "zett.E061"),
        ("ZETT_WEBHOOK_RETRIES", "5,30", "zett.E061"),
        ("ZETT_WEBHOOK_ALLOW_PRIVATE", "yes", "zett.E062"),
        ("ZETT_WEBHOOK_KEEP_DAYS", -1, "zett.E063"),
    ],
)
def test_manage_py_check_names_a_bad_webhook_setting(settings, name, value, code):
    from django.core.checks import run_checks

    setattr(settings, name, value)
    assert code in [message.id for message in run_checks(tags=["zett"])]


def test_a_webhook_saved_in_another_process_is_seen_within_a_second(allow_private, monkeypatch):
    """The listeners are read at most once a second; a save here is seen at once."""
    from agent_app.webhooks import events

    assert emit("run.failed", {}) == 0
    Webhook.objects.create(url="http://127.0.0.1:9/x", events=["run.failed"])
    assert emit("run.failed", {}) == 1  # saved here: seen at once
    Webhook.objects.update(active=False)  # as another process would: no signal here
    assert emit("run.failed", {}) == 1  # still known as listening for up to a second
    later = events.clock() + events.LISTENERS_SECONDS
    monkeypatch.setattr(events, "clock", lambda: later)
    assert emit("run.failed", {}) == 0


async def test_a_receiver_that_never_answers_holds_up_no_other(allow_private, settings):
    settings.ZETT_WEBHOOK_TIMEOUT = 60.0
    async with Receiver(hang=True) as stuck, Receiver() as fine:
        await sync_to_async(add_hook)(stuck.url, "run.failed")
        await sync_to_async(emit_in_transaction)("run.failed", {"request_id": "r1"})
        deliverer = Deliverer()
        deliverer.start()
        try:
            await stuck.wait_for(1)  # its attempt hangs from here on
            await sync_to_async(add_hook)(fine.url, "run.completed")
            await sync_to_async(emit_in_transaction)("run.completed", {"request_id": "r2"})
            [got] = await fine.wait_for(1)
            await deliverer.recorded(1)
        finally:
            await deliverer.stop()
    assert json.loads(got.body)["data"] == {"request_id": "r2"}
    stuck_row = await WebhookDelivery.objects.aget(event_type="run.failed")
    assert stuck_row.status == DeliveryStatus.PENDING and stuck_row.attempts == 1


def test_a_handoff_and_a_new_rating_become_their_events_in_the_signal_s_transaction(
    allow_private,
):
    from types import SimpleNamespace

    from django.dispatch import Signal

    from agent_app.webhooks.people_events import connect

    handoff_requested, feedback_saved = Signal(), Signal()
    connect(handoff_requested, feedback_saved)
    add_hook("http://127.0.0.1:9/x", "chat.handoff_requested,feedback.created")
    chat = SimpleNamespace(pk=uuid.uuid4(), assistant="demo", owner_id=7)
    rating = SimpleNamespace(
        pk=3, session_id=chat.pk, message_id=41, assistant="demo", user_id=7, rating="down",
        comment="wrong order number",
    )  # fmt: skip
    with transaction.atomic():
        handoff_requested.send(sender=None, session=chat, reason="refund", source="customer")
        feedback_saved.send(sender=None, feedback=rating, created=True)
        feedback_saved.send(sender=None, feedback=rating, created=False)  # a change: nothing
    bodies = [json.loads(row.body) for row in WebhookDelivery.objects.order_by("pk")]
    assert [body["type"] for body in bodies] == ["chat.handoff_requested", "feedback.created"]
    assert bodies[0]["data"] == {
        "chat_id": str(chat.pk), "assistant": "demo", "user_id": 7, "reason": "refund",
        "source": "customer",
    }  # fmt: skip
    assert bodies[1]["data"]["rating"] == "down" and bodies[1]["data"]["message_id"] == 41
    with pytest.raises(RuntimeError), transaction.atomic():
        handoff_requested.send(sender=None, session=chat, reason="again", source="assistant")
        raise RuntimeError("the handoff was not stored")
    assert WebhookDelivery.objects.count() == 2


def test_a_message_that_cannot_be_made_does_not_undo_the_change_it_reports(allow_private):
    add_hook("http://127.0.0.1:9/x", "run.failed")

    def broken() -> dict:
        raise KeyError("a field the message needs")

    with transaction.atomic():
        assert emit("run.failed", broken) == 0
        assert emit("run.failed", {"not json": object()}) == 0
        assert emit("run.failed", {"request_id": "r1"}) == 1
    assert WebhookDelivery.objects.count() == 1


def test_the_log_keeps_deliveries_for_the_days_set_and_pending_ones_until_sent(
    allow_private, settings
):
    from agent_app.webhooks.delivery import prune

    settings.ZETT_WEBHOOK_KEEP_DAYS = 30
    add_hook("http://127.0.0.1:9/x", "run.failed")
    for _ in range(3):
        emit("run.failed", {})
    old = timezone.now() - timedelta(days=31)
    first, second, third = WebhookDelivery.objects.order_by("pk")
    WebhookDelivery.objects.filter(pk=first.pk).update(status=DeliveryStatus.DELIVERED)
    WebhookDelivery.objects.filter(pk__in=[first.pk, second.pk]).update(created_at=old)
    WebhookDelivery.objects.filter(pk=third.pk).update(status=DeliveryStatus.FAILED)
    assert prune(timezone.now()) == 1  # the old delivered one; not the old pending one
    assert set(WebhookDelivery.objects.values_list("pk", flat=True)) == {second.pk, third.pk}
    settings.ZETT_WEBHOOK_KEEP_DAYS = 0
    WebhookDelivery.objects.update(status=DeliveryStatus.DELIVERED, created_at=old)
    assert prune(timezone.now()) == 0


def test_a_real_handoff_and_rating_send_their_webhook_events(allow_private, django_user_model):
    """The chat's own records (``agent_app.people.records``) send the signals the app
    connects at start-up."""
    from agent_app.guard.access import Person, visible_sessions
    from agent_app.models import ChatMessage, ChatSession
    from agent_app.people.records import mark_needs_human, rate

    user = django_user_model.objects.create_user("ada")
    chat = ChatSession.objects.create(owner=user, assistant="demo")
    answer = ChatMessage.objects.create(
        session=chat, position=1, role="assistant", content="Your order shipped."
    )
    add_hook("http://127.0.0.1:9/x", "chat.handoff_requested,feedback.created")
    person = Person(user.pk)
    rate(visible_sessions(person), person.key, user.pk, answer.pk, "down", "not yet")
    rate(visible_sessions(person), person.key, user.pk, answer.pk, "up", "")  # a change
    assert mark_needs_human(str(chat.pk), "I want a refund", "customer")
    bodies = [json.loads(row.body) for row in WebhookDelivery.objects.order_by("pk")]
    assert [body["type"] for body in bodies] == ["feedback.created", "chat.handoff_requested"]
    feedback, handoff = (body["data"] for body in bodies)
    assert (feedback["chat_id"], feedback["message_id"], feedback["rating"]) == (
        str(chat.pk),
        answer.pk,
        "down",
    )
    assert handoff == {
        "chat_id": str(chat.pk), "assistant": "demo", "user_id": user.pk,
        "reason": "I want a refund", "source": "customer",
    }  # fmt: skip
