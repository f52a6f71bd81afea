"""Who calls the HTTP API: an API token's user, or the browser of the session cookie.

- ``Authorization: Bearer <secret>`` (``agent_app.guard.tokens``): the token's user. A wrong,
  revoked or expired token, or an ``Authorization`` header of another form, is refused
  with 401 — never downgraded to the cookie. A request with a token has no browser
  (programs do not adopt a browser's chats) and needs no CSRF token: a browser never
  adds that header by itself, so a cross-site page cannot make one.
- Otherwise the session cookie, as the chat pages use it: the signed-in user, or the
  anonymous browser a page gave an id (``known_person_of_request``). A request with
  neither is 401, and the session store is never written (nor, without a cookie, read):
  a program that forgot its token must not leave a session row per request. A cookie
  carries itself into any cross-site request, so every unsafe request (``POST``,
  ``DELETE``) made with it passes Django's CSRF check (the ``X-CSRFToken`` header, as the
  page script sends it).
- A token in the query string is refused (401) rather than ignored: URLs end up in logs,
  proxies and browser histories, and a client that tried should learn why it failed.

Every accepted request spends one frame of the person's budget
(``agent_app.guard.limits``), the budget their sockets spend: one person, one budget.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware

from agent_app.agui.errors import AguiError, ErrorCode
from agent_app.guard.access import Person, known_person_of_request
from agent_app.guard.tokens import TokenRefused, WrongScheme, bearer_secret, token_of_secret

__all__ = ["QUERY_TOKEN_NAMES", "Caller", "caller_of"]

logger = logging.getLogger(__name__)

#: Query parameters a token is sometimes put in: refused, never read.
QUERY_TOKEN_NAMES = frozenset({"token", "access_token", "api_key", "apikey", "key", "secret"})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Caller:
    """The person behind a request, their user (``AnonymousUser`` for a browser), and
    whether they came with a token."""

    person: Person
    user: Any
    token: bool
    #: The API token's id (what it opens ends with it: ``agent_app.guard.token_watch``).
    token_id: int | None = None


class _CsrfCheck(CsrfViewMiddleware):
    """Django's own CSRF check, answering the reason instead of a response."""

    def _reject(self, request: HttpRequest, reason: str) -> Any:
        return reason


def caller_of(request: HttpRequest) -> Caller:
    """The caller of ``request`` (a sync function: it may read the session and a token);
    ``AguiError`` (401, 403) when refused."""
    if QUERY_TOKEN_NAMES & set(request.GET):
        raise AguiError(
            ErrorCode.UNAUTHORIZED,
            "A token is never read from the query string; send 'Authorization: Bearer <token>'",
            status=401,
        )
    header = request.headers.get("Authorization")
    try:
        raw = [] if header is None else [(b"authorization", header.encode("latin-1"))]
        secret = bearer_secret(raw)
        token = token_of_secret(secret) if secret is not None else None
    except TokenRefused as refused:
        logger.warning("Refused an API request to %s: %s", request.path, refused)
        problem = (
            str(refused)
            if isinstance(refused, WrongScheme)
            else "The API token is not valid (wrong, revoked or expired)"
        )
        raise AguiError(ErrorCode.UNAUTHORIZED, problem, status=401) from None
    if token is not None:
        return Caller(Person(token.user.pk, None), token.user, True, token.pk)
    person = known_person_of_request(request)
    if person is None:
        raise AguiError(ErrorCode.UNAUTHORIZED, "Sign in, or send an API token", status=401)
    if request.method not in _SAFE_METHODS:
        check = _CsrfCheck(lambda _: None)
        check.process_request(request)
        reason = check.process_view(request, None, (), {})
        if reason is not None:
            raise AguiError(
                ErrorCode.FORBIDDEN,
                f"CSRF check failed ({reason}): a request with the session cookie sends the "
                "X-CSRFToken header; a program sends an API token instead",
                status=403,
            )
    return Caller(person, request.user, False)
