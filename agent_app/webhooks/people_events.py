"""The webhook events of people in the loop: ``chat.handoff_requested``, ``feedback.created``.

The chat records a handoff or a rating in a transaction and sends a Django signal inside
it (``handoff_requested(sender, session, reason, source)``, ``feedback_saved(sender,
feedback, created)``); these receivers turn each into its webhook event in that same
transaction (``agent_app.webhooks.events.emit``). ``connect`` hooks them to the two
signals, once, at start-up. A changed rating is no ``feedback.created``.
"""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

from agent_app.webhooks.events import emit

__all__ = ["connect", "connect_people_signals", "on_feedback_saved", "on_handoff_requested"]


def on_handoff_requested(
    sender: Any, session: Any, reason: str = "", source: str = "", **kwargs: Any
) -> None:
    """``chat.handoff_requested``: the chat, why, and who asked (the person or the
    assistant)."""
    emit(
        "chat.handoff_requested",
        lambda: {
            "chat_id": str(session.pk),
            "assistant": getattr(session, "assistant", "") or "",
            "user_id": getattr(session, "owner_id", None),
            "reason": reason,
            "source": source,
        },
    )


def on_feedback_saved(sender: Any, feedback: Any, created: bool = False, **kwargs: Any) -> None:
    """``feedback.created``: a rating given for the first time (not one changed)."""
    if not created:
        return
    emit(
        "feedback.created",
        lambda: {
            "chat_id": str(feedback.session_id),
            "message_id": feedback.message_id,
            "feedback_id": feedback.pk,
            "assistant": getattr(feedback, "assistant", "") or "",
            "user_id": getattr(feedback, "user_id", None),
            "rating": feedback.rating,
            "comment": getattr(feedback, "comment", "") or "",
        },
    )


def connect(handoff_requested: Signal, feedback_saved: Signal) -> None:
    """Send the two events whenever the chat sends these signals (idempotent)."""
    handoff_requested.connect(on_handoff_requested, dispatch_uid="zett-webhook-handoff")
    feedback_saved.connect(on_feedback_saved, dispatch_uid="zett-webhook-feedback")


def connect_people_signals() -> None:
    """``connect`` to the chat's own signals (``agent_app.signals``; at start-up)."""
    from agent_app.signals import feedback_saved, handoff_requested

    connect(handoff_requested, feedback_saved)
