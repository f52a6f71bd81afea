"""The wire format: what a socket may send and what it is sent.

- ``frames``: the pydantic schemas of every frame in and out, the error codes
  (``ErrorCode``), the reasons a reply is refused (``ReplyReason``), ``Refusal`` (the one
  exception type every refusal is) and ``parse_frame``;
- ``text``: a frame's JSON text built fast and within the size budget (long deltas split,
  large fields cut), with a plain fallback.

The contract itself is written for users in ``docs/protocol.md``.
"""
