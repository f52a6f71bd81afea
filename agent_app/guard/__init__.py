"""Access control: who may open which chat, how much they may send, from where.

- ``access``: whose chat it is (a user, or an anonymous browser's key), and the sockets
  closed when a user signs out or a chat or user is deleted;
- ``limits``: frame budgets and socket counts (refusals are ``Refusal`` with
  ``rate_limited``);
- ``origins``: which handshakes may open a socket (the ``Origin`` check);
- ``bodies``: request bodies refused before they are read;
- ``headers``: the pages' security headers (``SecurityHeadersMiddleware``);
- ``tokens``: API tokens, and ``token_watch``: what a token opened ends with it.

The threats and the rules are written for users in ``docs/security.md``.
"""
