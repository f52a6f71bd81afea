"""Access control: who may open which chat, how much they may send, from where.

- ``access``: whose chat it is (a user, or an anonymous browser's key), and the sockets
  closed when a user signs out or a chat or user is deleted;
- ``limits``: frame budgets and socket counts (refusals are ``Refusal`` with
  ``rate_limited``);
- ``origins``: which handshakes may open a socket (the ``Origin`` check).

The threats and the rules are written for users in ``docs/security.md``.
"""
