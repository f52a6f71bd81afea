"""``manage.py zett_token create <username> [--name N] [--days D]`` prints a new API token's
secret (once: only its hash is stored); ``manage.py zett_token revoke <id>`` revokes one."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_app.models import ApiToken
from agent_app.tokens import issue


class Command(BaseCommand):
    help = "Create or revoke API tokens (Authorization: Bearer <secret> on a websocket)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Issue a token for a user; prints its secret")
        create.add_argument("username")
        create.add_argument("--name", default="", help="What the token is for")
        create.add_argument("--days", type=float, default=None, help="Days until it expires")
        revoke = actions.add_parser("revoke", help="Revoke a token by its id")
        revoke.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "create":
            self._create(options["username"], options["name"], options["days"])
        else:
            self._revoke(options["id"])

    def _create(self, username: str, name: str, days: float | None) -> None:
        model = get_user_model()
        user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"There is no user {username!r}")
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive: a token of theirs would not work")
        if days is not None and days <= 0:
            raise CommandError(f"--days must be more than 0, got {days}")
        if len(name) > 100:
            raise CommandError("--name may have at most 100 characters")
        token, secret = issue(user, name=name, days=days)
        self.stderr.write(
            f"Token {token.pk} for {username}"
            + (f", expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "")
            + ". The secret is shown only now:"
        )
        self.stdout.write(secret)

    def _revoke(self, token_id: int) -> None:
        if not ApiToken.objects.filter(pk=token_id).update(revoked=True):
            raise CommandError(f"There is no token {token_id}")
        self.stdout.write(
            f"Token {token_id} revoked: refused from now on; the sockets and event streams "
            "it opened close within a second."
        )
