"""Where the migrations find the webhook tables' helpers (``0019_pageless_runs`` names
``agent_app.webhooks.models.new_secret``); the tables live in ``agent_app.models.webhooks``."""

from agent_app.models.webhooks import (
    EVENT_TYPES,
    SECRET_PREFIX,
    DeliveryStatus,
    Webhook,
    WebhookDelivery,
    check_secret,
    event_names,
    new_secret,
    parse_events,
)

__all__ = [
    "EVENT_TYPES",
    "SECRET_PREFIX",
    "DeliveryStatus",
    "Webhook",
    "WebhookDelivery",
    "check_secret",
    "event_names",
    "new_secret",
    "parse_events",
]
