"""Runs without a page: started by a program or a schedule, read back later.

- ``start``: ``start_background_run``, a run of a chat started with no socket (the same
  durable run a socket starts: any socket, AG-UI stream or the page sees it live);
- ``state``: ``run_state``, where a run stands (status, answer, pending, usage, error);
- ``host``: ``BackgroundWork``, the loops a worker process runs besides its sockets (the
  webhook deliveries, the scheduler), with one start/stop seam;
- ``worker_loops``: the loops every worker registers at start-up, and ``loop_task``:
  ``LoopTask``, one loop in one task, started and stopped from outside.
"""
