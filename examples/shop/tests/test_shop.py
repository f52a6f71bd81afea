"""MyShop with zett installed: pages in the shop's frame, a chat with each assistant over a
socket, permissions, a program with an API token."""

from __future__ import annotations

import io
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import Client
from shop.models import Order

from tests.conftest import answer

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_chat_pages_wear_the_shops_frame_and_link_to_its_login(people):
    client = Client()
    listing = client.get("/help/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert "MyShop — shoes since 1999" in html  # the shop's own base.html
    assert 'href="/accounts/login/?next=/help/"' in html  # LOGIN_URL
    page = client.get(f"/help/s/{uuid.uuid4()}/").content.decode()
    assert "MyShop — shoes since 1999" in page and 'id="composer"' in page
    assert "Sign in to MyShop" in client.get("/accounts/login/").content.decode()


def test_new_chat_offers_each_person_the_assistants_they_may_use(people):
    alice, bob = people
    customer, staff = Client(), Client()
    customer.force_login(alice)
    staff.force_login(bob)
    offered_to_customer = customer.get("/help/").content.decode()
    assert "?assistant=" not in offered_to_customer  # one assistant: a plain New chat
    offered_to_staff = staff.get("/help/").content.decode()
    assert "?assistant=support" in offered_to_staff and "?assistant=sales" in offered_to_staff
    assert "Sales desk" in offered_to_staff


async def test_a_customer_chats_with_support_about_their_own_order(people, connect):
    alice, _ = people
    socket = await connect(str(uuid.uuid4()), user=alice)
    await socket.send({"type": "user_message", "content": "Hi"})
    assert answer(await socket.until("run_completed")) == "You are Support. How can I help?"
    await socket.send({"type": "user_message", "content": "Where is order 7?"})
    assert "Red shoes" in answer(await socket.until("run_completed"))
    await socket.send({"type": "user_message", "content": "And order 8?"})
    assert "You have no order 8." in answer(await socket.until("run_completed"))  # bob's


async def test_staff_chat_with_sales_and_customers_may_not(people, connect):
    alice, bob = people
    staff = await connect(str(uuid.uuid4()), user=bob)
    await staff.send({"type": "user_message", "content": "report", "assistant": "sales"})
    assert "Sales so far: 209.90 EUR." in answer(await staff.until("run_completed"))
    customer = await connect(str(uuid.uuid4()), user=alice)
    await customer.send({"type": "user_message", "content": "report", "assistant": "sales"})
    (refused,) = await customer.until("error")
    assert refused["code"] == "forbidden"
    await customer.send({"type": "user_message", "content": "hi", "assistant": "marketing"})
    (unknown,) = await customer.until("error")
    assert unknown["code"] == "unknown_assistant"


async def test_a_refund_runs_only_after_the_customer_approves_it(people, connect):
    alice, _ = people
    socket = await connect(str(uuid.uuid4()), user=alice)
    await socket.send({"type": "user_message", "content": "Please refund 7"})
    frames = await socket.until("custom")
    request = frames[-1]["event"]
    assert request["name"] == "approval_requested"
    assert request["payload"]["tool"] == "refund_order"
    assert (await Order.objects.aget(number=7)).refunds == 0
    payload = request["payload"]
    await socket.send(
        {
            "type": "external_event",
            "name": "approval_response",
            "payload": {
                "tool_call_id": payload["tool_call_id"],
                "approved": True,
                "digest": payload["digest"],
            },
        }
    )
    assert "Refunded order 7" in answer(await socket.until("run_completed"))
    assert (await Order.objects.aget(number=7)).refunds == 1


async def test_a_program_chats_with_an_api_token(people, connect):
    out = io.StringIO()
    create = sync_to_async(call_command)
    await create("zett_token", "create", "alice", "--name", "bot", stdout=out, stderr=io.StringIO())
    secret = out.getvalue().strip()
    headers = [(b"authorization", f"Bearer {secret}".encode())]
    socket = await connect(str(uuid.uuid4()), headers=headers)
    await socket.send({"type": "user_message", "content": "order 7"})
    assert "Red shoes" in answer(await socket.until("run_completed"))


def test_a_shop_page_carries_the_chat_widget(people):
    client = Client()
    client.force_login(people[0])
    html = client.get("/shoes/").content.decode()
    assert "MyShop — shoes since 1999" in html
    assert "<zett-chat" in html and 'shadowrootmode="open"' in html
    assert "Questions about your order?" in html and '"assistant": "support"' in html


def test_the_seed_command_creates_the_walkthroughs_people_once(django_user_model):
    from django.contrib.auth.models import Permission

    out = io.StringIO()
    call_command("shop_seed", stdout=out)
    assert "alice / alice-pw-123" in out.getvalue()
    call_command("shop_seed", stdout=io.StringIO())  # again: nothing doubles
    assert django_user_model.objects.count() == 2
    assert sorted(Order.objects.values_list("number", flat=True)) == [7, 8, 9]
    bob = django_user_model.objects.get(username="bob")
    assert bob.user_permissions.filter(pk=Permission.objects.get(codename="view_order").pk).exists()
    assert Client().login(username="alice", password="alice-pw-123")
