"""Scheduled runs: a prompt run for a person at the times a cron expression names.

- ``cron``: the expression and the time zone (``cronsim``, ``zoneinfo``), checked, and
  the next due time after a moment;
- ``models``: ``ScheduledRun``;
- ``firing``: claiming a due time (exactly one worker wins each) and starting its run;
- ``loop``: ``Scheduler``, the loop that fires what is due, in any number of workers.

docs/operations.md (*Schedules*) is the contract.
"""
