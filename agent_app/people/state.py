"""Who is staff: the permission, and the name a customer sees.

Where a chat stands with people and the refusal of a run start in a taken-over chat sit
lower, with the durable records that read them (``agent_app.durable.support``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["STAFF_PERMISSION", "is_staff", "staff_name"]

#: The permission of staff: the inbox, any chat's socket, takeover.
STAFF_PERMISSION = "agent_app.staff_chat"


def is_staff(user: Any) -> bool:
    """Whether ``user`` holds ``agent_app.staff_chat`` (superusers do)."""
    return bool(user is not None and user.is_authenticated and user.has_perm(STAFF_PERMISSION))


def staff_name(user: Any) -> str:
    """The name a customer sees for a member of staff: their full or first name, else
    their username."""
    full = (getattr(user, "get_full_name", lambda: "")() or "").strip()
    return full or (getattr(user, "first_name", "") or "").strip() or user.get_username()
