"""API tokens: how a program (not a browser) chats as a user.

``issue`` makes a token and returns its secret, the only time it exists in clear: the
database keeps a SHA-256 of it (the secret is 32 random bytes, so a plain hash is enough
and a leaked table gives no usable token). ``user_of_secret`` finds the token by that hash
and compares the hashes in constant time; it refuses a revoked or expired token, and a
token whose user is inactive (a deleted user's tokens are deleted with the user). Using a
token writes ``last_used_at`` at most once per ``ZETT_TOKEN_TOUCH_SECONDS``, so a client
reconnecting in a loop does not turn every handshake into a write.

``BearerTokenMiddleware`` reads ``Authorization: Bearer <secret>`` from a websocket
handshake and puts the token's user in ``scope["user"]``; a handshake with a bad token is
refused (HTTP 403, logged with the reason), never downgraded to anonymous. A token is
never read from a query string: URLs end up in logs and browser histories. What a token
opened ends when the token does (``agent_app.guard.token_watch``, which asks
``valid_token_ids``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone

from agent_app import conf
from agent_app.models import ApiToken
from agent_app.models.statements import get_joined

__all__ = [
    "BearerTokenMiddleware",
    "TokenRefused",
    "WrongScheme",
    "bearer_secret",
    "issue",
    "token_of_secret",
    "user_of_secret",
    "valid_token_ids",
]

logger = logging.getLogger(__name__)

#: What every secret starts with (tells a zett token apart in a config file or a leak scan).
SECRET_PREFIX = "zett_"


class TokenRefused(Exception):
    """The presented token is unknown, revoked, expired, or its user may not sign in."""


class WrongScheme(TokenRefused):
    """An ``Authorization`` header of another scheme (``Token …``, ``Basic …``): its message
    tells the caller to send ``Bearer``."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def issue(user: Any, *, name: str = "", days: float | None = None) -> tuple[ApiToken, str]:
    """A new token of ``user`` (valid ``days`` days, or until revoked) and its secret."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(days=days) if days is not None else None
    token = ApiToken.objects.create(
        user=user, name=name, prefix=secret[:12], key_hash=_hash(secret), expires_at=expires_at
    )
    return token, secret


def user_of_secret(secret: str) -> Any:
    """The user a token secret stands for; ``TokenRefused`` saying why it is refused."""
    return token_of_secret(secret).user


def token_of_secret(secret: str) -> ApiToken:
    """The token a secret is (its ``user`` loaded); ``TokenRefused`` saying why it is
    refused."""
    digest = _hash(secret)
    token = _token_with_user(digest)
    if token is None or not hmac.compare_digest(token.key_hash, digest):
        raise TokenRefused("unknown token")
    now = timezone.now()
    if token.revoked:
        raise TokenRefused(f"token {token.pk} is revoked")
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRefused(f"token {token.pk} expired")
    if not token.user.is_active:
        raise TokenRefused(f"token {token.pk}: its user is inactive")
    touch = timedelta(seconds=float(conf.ZETT_TOKEN_TOUCH_SECONDS))
    if token.last_used_at is None or now - token.last_used_at >= touch:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def _token_with_user(digest: str) -> ApiToken | None:
    """The token of ``digest`` with its user, as ``select_related("user")`` gives them, by
    one indexed lookup whose statement is built once (``statements.get_joined``): building
    the ORM's query was most of a request's token check."""
    try:
        return get_joined(ApiToken, "user", digest, by="key_hash")
    except ApiToken.DoesNotExist:
        return None


def valid_token_ids(token_ids: Iterable[int]) -> set[int]:
    """Those of ``token_ids`` still good: not revoked, not expired, not deleted, their
    user active (what ``agent_app.guard.token_watch`` asks of open connections' tokens)."""
    good = ApiToken.objects.filter(pk__in=list(token_ids), revoked=False, user__is_active=True)
    good = good.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    return set(good.values_list("pk", flat=True))


def bearer_secret(headers: Any) -> str | None:
    """The secret of an ``Authorization: Bearer`` header in ASGI ``headers``; None without
    one. ``TokenRefused`` for an Authorization header of another form."""
    for key, value in headers:
        if key.lower() == b"authorization":
            scheme, _, secret = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() != "bearer" and secret.strip():
                raise WrongScheme(
                    f"The Authorization header uses the {scheme[:20]!r} scheme: "
                    "send 'Authorization: Bearer <token>'"
                )
            if scheme.lower() != "bearer" or not secret.strip():
                raise TokenRefused("the Authorization header is not 'Bearer <token>'")
            return secret.strip()
    return None


class BearerTokenMiddleware:
    """ASGI middleware: a websocket handshake with a bearer token acts as its user."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            return await self.inner(scope, receive, send)
        try:
            secret = bearer_secret(scope.get("headers", ()))
            if secret is None:
                return await self.inner(scope, receive, send)
            token = await database_sync_to_async(token_of_secret)(secret)
        except TokenRefused as refused:
            logger.warning("Refused a websocket handshake on %s: %s", scope.get("path"), refused)
            message = await receive()  # websocket.connect
            if message["type"] == "websocket.connect":
                await send({"type": "websocket.close", "code": 403})
            return None
        # A program's socket: its user, and no browser session to adopt chats from; it
        # closes when its token ends (``agent_app.guard.token_watch``).
        scope = dict(scope, user=token.user, zett_token=True, zett_token_id=token.pk)
        return await self.inner(scope, receive, send)
