"""Runs without a page: started by a program or a schedule, read back later.

- ``start``: ``start_background_run``, a run of a chat started with no socket (the same
  durable run a socket starts: any socket, AG-UI stream or the page sees it live);
- ``state``: ``run_state``, where a run stands (status, answer, pending, usage, error);
- ``host``: the webhook deliveries and the scheduler, registered for every process's loops
  (``agent_app.process.loops``), and ``BackgroundWork``, a process that runs them alone.
"""
