"""``manage.py zett_webhook``: add, list and remove webhooks.

    python manage.py zett_webhook add https://example.com/hooks/zett \
        --events run.completed,run.failed [--secret whsec_…] [--description D]
    python manage.py zett_webhook list
    python manage.py zett_webhook remove <id>

``add`` checks the URL (public addresses only, unless ``ZETT_WEBHOOK_ALLOW_PRIVATE``) and
the events, makes a secret when none is given, and prints the id and the secret (the
receiver verifies signatures with it).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_app.models import Webhook
from agent_app.models.webhooks import EVENT_TYPES, new_secret


class Command(BaseCommand):
    help = "Add, list or remove webhooks (signed HTTP POSTs of run and chat events)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="Add a webhook; prints its id and secret")
        add.add_argument("url")
        add.add_argument(
            "--events",
            required=True,
            nargs="+",
            help=f"One or more (space- or comma-separated) of: {', '.join(EVENT_TYPES)}",
        )
        add.add_argument("--secret", default="", help="whsec_<base64> (default: a new one)")
        add.add_argument("--description", default="")
        actions.add_parser("list", help="List the webhooks")
        remove = actions.add_parser("remove", help="Remove a webhook (and its deliveries)")
        remove.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "add":
            events = ",".join(options["events"])  # `--events a b` and `--events a,b` alike
            self._add(options["url"], events, options["secret"], options["description"])
        elif action == "list":
            for hook in Webhook.objects.order_by("pk"):
                state = "active" if hook.active else "off"
                events = ",".join(hook.event_list)
                self.stdout.write(f"{hook.pk}\t{state}\t{hook.url}\t{events}")
        else:
            deleted, _ = Webhook.objects.filter(pk=options["id"]).delete()
            if not deleted:
                raise CommandError(f"There is no webhook {options['id']}")
            self.stdout.write(f"Removed webhook {options['id']}")

    def _add(self, url: str, events: str, secret: str, description: str) -> None:
        hook = Webhook(
            url=url, events=events, secret=secret or new_secret(), description=description
        )
        try:
            hook.full_clean()
        except ValidationError as bad:
            problems = "; ".join(
                f"{field}: {' '.join(messages)}" for field, messages in bad.message_dict.items()
            )
            raise CommandError(problems) from None
        hook.save()
        self.stdout.write(f"Added webhook {hook.pk} for {', '.join(hook.event_list)}")
        self.stdout.write(f"Secret (verify signatures with it): {hook.secret}")
