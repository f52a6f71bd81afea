"""The app's signals: what people in the loop do, for webhooks and the host project's code.

Each is sent *inside* the transaction that records its event, so a receiver that writes
rows (an outbox of webhook deliveries) commits or rolls back with it; a receiver that
talks to the outside world should wait for ``transaction.on_commit``.

- ``handoff_requested(sender=ChatSession, session, reason, source)``: a chat was marked as
  needing a person; ``source`` is ``"customer"`` (the page's "Talk to a person") or
  ``"assistant"`` (the ``handoff_to_human`` tool). Sent each time it is asked, also when
  the chat was marked already.
- ``feedback_saved(sender=ChatFeedback, feedback, created)``: a rating was given
  (``created``) or changed.

They sit below every layer, since the webhooks hear what the people code sends; a host
project also finds them at ``agent_app.people.signals``.
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["feedback_saved", "handoff_requested"]

handoff_requested = Signal()
feedback_saved = Signal()
