"""Standard Webhooks signatures, made with the reference ``standardwebhooks`` package.

``webhook-signature`` is ``v1,<base64 of HMAC-SHA256("<webhook-id>.<webhook-timestamp>.<body>")>``
keyed with the secret's bytes (``whsec_<base64>``). The timestamp is the attempt's (a
receiver refuses messages more than five minutes old), the id and the body the event's.
"""

from __future__ import annotations

from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook as Signer

__all__ = ["headers_for"]


def headers_for(secret: str, message_id: str, body: str, at: datetime) -> dict[str, str]:
    """The three Standard Webhooks headers of one attempt made ``at``."""
    at = at.astimezone(UTC)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Signer(secret).sign(message_id, at, body),
    }
