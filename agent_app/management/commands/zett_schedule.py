"""``manage.py zett_schedule``: add, list and remove scheduled runs.

    python manage.py zett_schedule add --assistant demo --user ada --cron "0 7 * * 1-5" \
        --timezone Europe/Berlin --prompt "Summarise yesterday's orders" [--name N] [--one-chat]
    python manage.py zett_schedule list
    python manage.py zett_schedule remove <id>

Each due time of the cron expression (in the time zone) runs the prompt as the user, with
the assistant, in a new chat — or, with ``--one-chat``, always in the same chat.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_app.models import ScheduledRun
from agent_app.schedules.checks import check_assistant


class Command(BaseCommand):
    help = "Add, list or remove scheduled runs (a prompt run at the times of a cron expression)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="Add a schedule; prints its id and next run")
        add.add_argument("--assistant", required=True)
        add.add_argument(  # --owner: the field's name (ScheduledRun.owner)
            "--user", "--owner", dest="user", required=True, help="The username the runs are for"
        )
        add.add_argument(
            "--cron", required=True, help='e.g. "0 7 * * *" (minute hour day month weekday)'
        )
        add.add_argument(
            "--timezone", "--time-zone", default="UTC", help="An IANA name, e.g. Europe/Berlin"
        )
        add.add_argument("--prompt", required=True)
        add.add_argument("--name", default="")
        add.add_argument(
            "--one-chat",
            action="store_true",
            help="Every run in one chat (default: a new chat each)",
        )
        actions.add_parser("list", help="List the schedules")
        remove = actions.add_parser("remove", help="Remove a schedule")
        remove.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "add":
            self._add(options)
        elif action == "list":
            for row in ScheduledRun.objects.select_related("owner").order_by("pk"):
                state = "on" if row.enabled else "off"
                upcoming = row.next_fire_at.isoformat() if row.next_fire_at else "-"
                self.stdout.write(
                    f"{row.pk}\t{state}\t{row.cron}\t{row.timezone}\t{row.assistant}\t"
                    f"{row.owner}\tnext {upcoming}\t{row.name}"
                )
        else:
            deleted, _ = ScheduledRun.objects.filter(pk=options["id"]).delete()
            if not deleted:
                raise CommandError(f"There is no schedule {options['id']}")
            self.stdout.write(f"Removed schedule {options['id']}")

    def _add(self, options: dict[str, Any]) -> None:
        model = get_user_model()
        owner = model._default_manager.filter(**{model.USERNAME_FIELD: options["user"]}).first()
        if owner is None:
            raise CommandError(f"There is no user {options['user']!r}")
        row = ScheduledRun(
            name=options["name"],
            assistant=options["assistant"],
            owner=owner,
            prompt=options["prompt"],
            cron=options["cron"],
            timezone=options["timezone"],
            new_chat=not options["one_chat"],
        )
        try:
            row.full_clean()
            check_assistant(row.assistant, owner)
        except ValidationError as bad:
            problems = (
                "; ".join(
                    f"{field}: {' '.join(texts)}" for field, texts in bad.message_dict.items()
                )
                if hasattr(bad, "error_dict")
                else " ".join(bad.messages)
            )
            raise CommandError(problems) from None
        row.save()
        self.stdout.write(f"Added schedule {row.pk}; next run {row.next_fire_at.isoformat()}")
