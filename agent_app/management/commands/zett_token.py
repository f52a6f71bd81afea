"""``manage.py zett_token create <username> [--name N] [--days D]`` prints a new API token's
secret (once: only its hash is stored); ``manage.py zett_token revoke <id>`` revokes one;
``manage.py zett_token list [<username>] [--all]`` lists the tokens that work (with
``--all`` the revoked and expired ones too): id, user, name, the secret's first characters,
created, last used, expiry and state. Never a secret."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q
from django.utils import timezone

from agent_app.guard.tokens import issue
from agent_app.models import ApiToken


class Command(BaseCommand):
    help = "Create, list or revoke API tokens (Authorization: Bearer <secret>)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Issue a token for a user; prints its secret")
        create.add_argument("username")
        create.add_argument("--name", default="", help="What the token is for")
        create.add_argument("--days", type=float, default=None, help="Days until it expires")
        revoke = actions.add_parser("revoke", help="Revoke a token by its id")
        revoke.add_argument("id", type=int)
        listing = actions.add_parser("list", help="List tokens (never their secrets)")
        listing.add_argument("username", nargs="?", default=None, help="Only this user's")
        listing.add_argument("--all", action="store_true", help="Revoked and expired tokens too")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "create":
            self._create(options["username"], options["name"], options["days"])
        elif options["action"] == "list":
            self._list(options["username"], everything=options["all"])
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

    def _list(self, username: str | None, *, everything: bool) -> None:
        now = timezone.now()
        tokens = ApiToken.objects.select_related("user").order_by("pk")
        if username is not None:
            model = get_user_model()
            if not model._default_manager.filter(**{model.USERNAME_FIELD: username}).exists():
                raise CommandError(f"There is no user {username!r}")
            tokens = tokens.filter(**{f"user__{model.USERNAME_FIELD}": username})
        if not everything:
            tokens = tokens.filter(revoked=False).filter(
                Q(expires_at__isnull=True) | Q(expires_at__gt=now)
            )
        rows = [
            (
                str(token.pk),
                token.user.get_username(),
                token.name or "-",
                f"{token.prefix}…",
                _when(token.created_at),
                _when(token.last_used_at),
                _when(token.expires_at),
                _state(token, now),
            )
            for token in tokens
        ]
        if not rows:
            self.stderr.write(
                "No tokens." if everything else "No working tokens (--all: every one)."
            )
            return
        header = ("id", "user", "name", "prefix", "created", "last used", "expires", "state")
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write(
                "  ".join(
                    cell.ljust(width) for cell, width in zip(row, widths, strict=True)
                ).rstrip()
            )


def _when(moment: Any) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M}"


def _state(token: ApiToken, now: Any) -> str:
    if token.revoked:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "expired"
    return "active"
