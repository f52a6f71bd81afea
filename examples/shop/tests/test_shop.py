"""MyShop with zett installed: pages in the shop's frame, a chat with each assistant through
zett's testing kit (its own offline model, or a scripted one), permissions, approvals, a
program with an API token."""

from __future__ import annotations

import io
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.test import Client
from shop.models import Order

from agent_app.testing import ChatRefused, call, text

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


async def test_a_customer_chats_with_support_about_their_own_order(people, zett_chat):
    alice, _ = people
    chat = await zett_chat(user=alice)  # the shop's offline model (ZETT_MODEL) answers
    await chat.send("Hi")
    assert chat.answer_text == "You are Support. How can I help?"
    await chat.send("Where is order 7?")
    assert "Red shoes" in chat.answer_text
    await chat.send("And order 8?")
    assert "You have no order 8." in chat.answer_text  # bob's


async def test_lookup_order_sees_only_the_customers_own_orders(people, script_model, zett_chat):
    alice, _ = people
    script = [call("lookup_order", number=8), call("lookup_order", number=7), text("Found.")]
    model = script_model(script, assistant="support")
    chat = await zett_chat(user=alice, assistant="support")
    await chat.send("Orders 8 and 7, please")
    bobs, hers = [e["message"]["content"] for e in chat.events if e["type"] == "tool_completed"]
    assert bobs == "You have no order 8." and hers.startswith("Order 7: Red shoes")
    assert model.requests[0].messages[0].content.startswith("You are Support.")


async def test_staff_chat_with_sales_and_customers_may_not(people, zett_chat):
    alice, bob = people
    staff = await zett_chat(user=bob, assistant="sales")
    await staff.send("report")
    assert "Sales so far: 209.90 EUR." in staff.answer_text
    customer = await zett_chat(user=alice, assistant="sales")
    with pytest.raises(ChatRefused) as refused:
        await customer.send("report")
    assert refused.value.code == "forbidden"
    stranger = await zett_chat(user=alice, assistant="marketing")
    with pytest.raises(ChatRefused, match="unknown_assistant"):
        await stranger.send("hi")


async def test_sales_asks_support_whose_refund_waits_for_the_persons_approval(people, zett_chat):
    _, bob = people
    chat = await zett_chat(user=bob, assistant="sales")
    await chat.send("refund 8")
    (wait,) = chat.pending
    assert (wait["tool"], wait["agent"]) == ("refund_order", "support")
    assert (await Order.objects.aget(number=8)).refunds == 0
    await chat.approve()
    assert chat.answer_text == "Done. Done. Refunded order 8 (120.00 EUR)."
    assert (await Order.objects.aget(number=8)).refunds == 1
    support = {e["type"] for e in chat.events if e.get("agent") == "support"}
    assert {"tool_started", "tool_completed", "text_delta"} <= support


async def test_a_refund_runs_only_after_the_customer_approves_it(people, zett_chat):
    alice, _ = people
    chat = await zett_chat(user=alice)
    await chat.send("Please refund 7")
    (wait,) = chat.pending
    assert (wait["kind"], wait["tool"]) == ("approval", "refund_order")
    assert (await Order.objects.aget(number=7)).refunds == 0
    await chat.approve()
    assert "Refunded order 7" in chat.answer_text
    assert (await Order.objects.aget(number=7)).refunds == 1


async def test_a_denied_refund_never_runs(people, script_model, zett_chat):
    alice, _ = people
    model = script_model([call("refund_order", number=7), text("I did not refund it.")])
    chat = await zett_chat(user=alice, assistant="support")
    await chat.send("Refund order 7")
    await chat.deny()
    assert chat.answer_text == "I did not refund it."
    assert not model.requests[-1].messages[-1].success  # the model heard it was denied
    assert (await Order.objects.aget(number=7)).refunds == 0


async def test_a_program_chats_with_an_api_token(people, zett_chat):
    out = io.StringIO()
    create = sync_to_async(call_command)
    await create("zett_token", "create", "alice", "--name", "bot", stdout=out, stderr=io.StringIO())
    chat = await zett_chat(token=out.getvalue().strip())
    await chat.send("order 7")
    assert "Red shoes" in chat.answer_text


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
