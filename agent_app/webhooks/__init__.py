"""Signed webhooks: what happened in a chat, told to another system's URL.

- ``events``: the event types and ``emit``, the one way an event enters the outbox (in
  the caller's transaction);
- ``run_events``: ``run.completed``, ``run.failed``, ``run.waiting``, from the run's end
  and its waits; ``people_events``: ``chat.handoff_requested`` and ``feedback.created``,
  from the signals the chat sends when they are recorded;
- ``models``: ``Webhook`` (a URL, its events, its secret) and ``WebhookDelivery`` (one
  event for one webhook: the outbox row and its delivery log);
- ``addresses``: which URLs may be called (no private or loopback address, unless
  ``ZETT_WEBHOOK_ALLOW_PRIVATE``);
- ``signing``: Standard Webhooks headers, made with the reference ``standardwebhooks``;
- ``client``: one HTTP POST to the address that was checked, with a deadline;
- ``delivery``: ``Deliverer``, the loop that claims due deliveries and sends them, with
  retries and backoff, from any worker.

docs/operations.md (*Webhooks*) is the contract.
"""
