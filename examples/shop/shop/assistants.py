"""The shop's two assistants: Support (for every customer; refunds need approval) and Sales
(only for staff with the ``shop.view_order`` permission). Sales may ask Support about orders
(``delegates``): Support then works as a sub-run of the staff member's chat, with its own
tools, and its refunds still wait for the person's approval."""

from asgiref.sync import sync_to_async
from django.db.models import F, Sum

from agent_app.assistants import Assistant, current_user, register
from shop.models import Order
from zett_agent.tools.base import tool


def _own_order(number: int) -> Order | None:
    user = current_user()
    if not user.is_authenticated:
        return None
    return Order.objects.filter(number=number, customer=user).first()


@tool(idempotent=True)
async def lookup_order(number: int) -> str:
    """Look up one of the customer's orders.

    Args:
        number: The order number.

    Guidelines:
        - Use when the customer asks about an order.
    """
    order = await sync_to_async(_own_order)(number)
    if order is None:
        return f"You have no order {number}."
    state = "refunded" if order.refunds else "paid"
    return f"Order {number}: {order.item}, {order.total_cents / 100:.2f} EUR, {state}."


def _refund(number: int) -> str:
    order = _own_order(number)
    if order is None:
        return f"You have no order {number}."
    Order.objects.filter(pk=order.pk).update(refunds=F("refunds") + 1)
    return f"Refunded order {number} ({order.total_cents / 100:.2f} EUR)."


@tool(atomic=True)
def refund_order(number: int) -> str:
    """Refund one of the customer's orders.

    Args:
        number: The order number.

    Guidelines:
        - Only when the customer asks for a refund; the customer approves each refund.
    """
    # Atomic: the refund and the record of this call's result commit together, so a
    # crash never refunds twice (nor loses a refund that was made).
    return _refund(number)


@tool(idempotent=True)
async def sales_report() -> str:
    """Sum up the shop's sales.

    Guidelines:
        - Use when asked how the shop is doing.
    """
    total = await sync_to_async(lambda: Order.objects.aggregate(total=Sum("total_cents")))()
    return f"Sales so far: {(total['total'] or 0) / 100:.2f} EUR."


@register
class Support(Assistant):
    id = "support"
    name = "Support"
    description = "Looks up the person's orders and refunds them."
    instructions = "You are Support. You help MyShop's customers with their orders."
    tools = [lookup_order, refund_order]
    approval_required = {"refund_order"}


@register
class Sales(Assistant):
    id = "sales"
    name = "Sales desk"
    instructions = "You are Sales. You tell MyShop's staff how sales are going."
    tools = [sales_report]
    permission_required = "shop.view_order"
    delegates = ["support"]  # a tool ask_support(request)
