"""What outlives a socket or a process: everything the database holds.

- ``persistence``: ``OrmPersistenceExtension``, the conversation written ahead as it
  happens, and ``RunSeams``, what a run shares with it;
- ``runs``: a run's row, written before it starts (``begin_run``) and when it ends;
- ``store``: message rows, the history restored for the model;
- ``waits``: a question's or approval's stored wait, claimed exactly once;
- ``recovery``: runs whose process died, settled as ``interrupted`` or ``paused``;
- ``sequence``: the frame numbering's high-water mark, reserved in blocks;
- ``history``: the ``session`` and ``history_page`` frames' items;
- ``audit``: the record of every reply and verdict;
- ``deadlocks``: transactions PostgreSQL ended as deadlocked, run again;
- ``chat_records``: the record of every chat stored (the quota), and of those deleted;
- ``titles``: a new chat's short title, made from its first message;
- ``support``: where a chat stands with people (``Support``), and ``TakenOver``, the
  refusal of a run start in a chat staff took over.

The single statements every write uses are ``agent_app.models.statements``.
"""
