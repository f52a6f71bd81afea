"""People in the loop: feedback on answers, asking for a person, staff who take a chat over.

What each part does, and the one rule that keeps the races out:

- **Feedback** (``records.rate``): a person rates an answer of their own chat 👍/👎 with an
  optional comment; one ``ChatFeedback`` row per person per answer, changed in place.
- **Asking for a person** (``request_human`` frame, the ``handoff_to_human`` tool of an
  assistant with ``handoff = True``): the chat is marked ``needs_human`` and every socket
  gets ``handoff_requested``.
- **Staff** (permission ``agent_app.staff_chat``) open any chat's socket, ``takeover``,
  write ``staff_message``\\ s and ``hand_back``.

The rule: *while a chat is taken over, no run starts*, and the database says so. The
takeover is one transaction on the chat's row (``records.take_over``); ``begin_run`` reads
the same row under the same lock (``durable.store.bump_version``), so a run either was
stored before the takeover — and the takeover then cancels it, wherever it runs, before it
announces itself — or it is refused, and its message is stored for the staff instead
(``records.store_customer_message``). So no assistant text reaches a socket after
``taken_over``: the run's last frame went out before it, on every worker.

Frames outside a run (``taken_over``, ``staff_message``, ``handed_back``, a customer's
``handoff_requested``) are numbered like a run's: under the session's lease, from a block
reserved in the database (``agent_app.sessions.people.announce``), so ``seq`` grows
across workers. A
``handoff_requested`` from the tool goes out inside its run, numbered by the run.

Webhooks and other listeners hook in through ``agent_app.people.signals``, sent inside
the transaction that records the event.

This package holds what lies below the agents: the records, the ``handoff_to_human`` tool
and its seam (``hub``), who is staff, the inbox's reads, the admin's parts, the export.
Each part above sits with its layer: the takeover in a live session in
``agent_app.sessions.people``, the socket's frames in ``agent_app.websocket.people``, the
staff pages in ``agent_app.views.people``; where a chat stands with people is
``agent_app.durable.support``.
"""
