"""What a worker process runs beside its sockets, and how it stops: plumbing every layer
reads and that imports nothing of the app but its settings.

- ``loops``: the loops of one process's event loop (``Background``): periodic jobs (the
  sweep of the live sessions) and the loops the app registers for every worker (webhook
  deliveries, the scheduler);
- ``loop_task``: ``LoopTask``, one loop in one task, started and stopped from outside;
- ``shutdown``: the graceful drain on SIGTERM (``draining``, ``at_drain``);
- ``connection``: the default database's connection, looked up once per call in the ORM's
  thread (``default_connection``).
"""
