"""A session's life in this process: its sockets, its run, its replies.

- ``live``: ``LiveSession``, the session in this process (it holds the collaborators
  below), and the story of where its state lives, how a run flows and how it is cancelled;
- ``run``: ``Run``, one run's whole life (start, events, waits, end, outcome), with its
  parts: ``run_state`` (``RunState`` and its transitions, ``RunOwner``), ``run_waits``
  (the waits it stores and closes), ``run_end`` (its outcome stored and sent, or a
  handover);
- ``fanout``: ``Feed``, how one numbered frame reaches every socket (the hot path);
- ``door``: ``Door``, a socket's way in: the ``session`` frame, what it missed, then live;
- ``replies``: ``ReplyDesk``, answers, approvals and steers, live or for a paused run,
  and the continuation of a paused run;
- ``follower``: following a run that another worker runs;
- ``settling``: ``Settler``, the runs a dead process left settled under the lease, and
  ``take_lease``;
- ``registry``: the live sessions of the process and their session bus;
- ``daphne_exit``: daphne's own last shutdown step, made to cancel every socket;
- ``people``: people in the loop on a live session (takeover, staff messages, hand
  back, a customer's handoff), announced under the session's lease;
- ``background``: the sweep, the runs a dead worker left continued with no socket;
- ``backpressure``: the send buffers of sockets and streams, and who is dropped;
- ``stopping``: a chat's run stopped from a page that is not the chat.

The drain on SIGTERM and the host of the process's loops are ``agent_app.process``'s;
the refusals ``Busy`` and ``NotRunning`` are ``agent_app.protocol.refusals``.

Nothing here knows whether there is one worker or many: that is the bus's business
(``agent_app.bus``).
"""
