"""The assistant the kit's tests chat with: a small shop desk whose tools say who called
them, one of which needs approval, and a staff-only one."""

from __future__ import annotations

from agent_app.assistants import Assistant, current_user
from zett_agent.tools.base import tool

#: What the tools did, in order (cleared by the ``desk`` fixture).
DONE: list[str] = []


@tool
async def whoami() -> str:
    """Say who is chatting.

    Guidelines:
        - Use when asked who the user is.
    """
    user = current_user()
    return user.get_username() if user.is_authenticated else "anonymous"


@tool
async def refund(order: int) -> str:
    """Refund an order.

    Args:
        order: The order number.

    Guidelines:
        - The user approves each refund.
    """
    DONE.append(f"refund {order} for {current_user()}")
    return f"Refunded order {order}."


@tool
async def stock(item: str) -> str:
    """Count an item in stock.

    Args:
        item: What to count.

    Guidelines:
        - Use when asked about stock.
    """
    DONE.append(f"stock {item}")
    return f"3 {item} in stock."


class Desk(Assistant):
    id = "kit-desk"
    name = "Desk"
    instructions = "You are the desk."
    tools = [whoami, refund, stock]
    approval_required = {"refund"}


class Back(Assistant):
    id = "kit-back"
    name = "Back office"
    instructions = "You are the back office."
    tools = [stock]
    permission_required = "agent_app.view_chatsession"
