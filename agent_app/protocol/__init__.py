"""The wire format: what a socket may send and what it is sent.

- ``frames``: the pydantic schemas of every inbound frame and ``parse_frame``, and every
  name of the protocol (re-exported from the modules below);
- ``outbound``: the frames a socket is sent, the error codes (``ErrorCode``), the reasons
  a reply is refused (``ReplyReason``), ``Refusal`` (the one exception type every refusal
  is);
- ``refusals``: why a session refuses a request, ``Busy`` (a run is active) and
  ``NotRunning`` (none is);
- ``text``: a frame's JSON text built fast and within the size budget (long deltas split,
  large fields cut), with a plain fallback.

The contract itself is written for users in ``docs/protocol.md``.
"""
