"""``manage.py zett_export --feedback [--rating up|down] [--assistant ID] [--since DATE]
[--output FILE]`` writes every rated answer as one JSON line: the conversation up to it,
the answer, the rating and the comment (``agent_app.people.export``), for evaluation sets."""

from __future__ import annotations

from datetime import datetime, time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.timezone import make_aware

from agent_app.people.export import feedback_cases


class Command(BaseCommand):
    help = "Export rated answers as JSONL (the conversation up to each, rating, comment)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--feedback", action="store_true", help="Export rated answers")
        parser.add_argument("--rating", choices=["up", "down"], help="Only this rating")
        parser.add_argument("--assistant", help="Only answers of this assistant")
        parser.add_argument("--since", help="Only ratings given or changed since (ISO date)")
        parser.add_argument("--output", help="Write to this file instead of standard output")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["feedback"]:
            raise CommandError("Say what to export: --feedback")
        since = None
        if options["since"]:
            since = parse_datetime(options["since"])
            if since is None and (day := parse_date(options["since"])) is not None:
                since = datetime.combine(day, time.min)
            if since is None:
                raise CommandError(f"--since {options['since']!r} is no ISO date or time")
            if since.tzinfo is None:
                since = make_aware(since)
        lines = feedback_cases(options["rating"], options["assistant"], since)
        count = 0
        if options["output"]:
            with open(options["output"], "w", encoding="utf-8") as out:
                for line in lines:
                    out.write(line + "\n")
                    count += 1
        else:
            for line in lines:
                self.stdout.write(line)
                count += 1
        self.stderr.write(f"Exported {count} rated answers")
