"""``manage.py zett_token list``: which tokens work, whose, and since when; never a secret."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from agent_app.guard.tokens import issue
from agent_app.models import ApiToken

pytestmark = pytest.mark.django_db


def listing(*args: str) -> tuple[list[list[str]], str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("zett_token", "list", *args, stdout=out, stderr=err)
    rows = [line.split("  ") for line in out.getvalue().splitlines()]
    return [[cell.strip() for cell in row if cell.strip()] for row in rows], err.getvalue()


def test_list_shows_working_tokens_and_with_all_every_one(django_user_model):
    ada = django_user_model.objects.create_user("ada")
    bob = django_user_model.objects.create_user("bob")
    working, secret = issue(ada, name="CI bot", days=30)
    revoked, _ = issue(ada, name="old")
    revoked.revoked = True
    revoked.save()
    expired, _ = issue(bob, name="laptop")
    ApiToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(days=1))

    rows, _ = listing()
    assert rows[0] == ["id", "user", "name", "prefix", "created", "last used", "expires", "state"]
    assert [row[:3] + row[-1:] for row in rows[1:]] == [
        [str(working.pk), "ada", "CI bot", "active"]
    ]
    assert rows[1][3] == f"{working.prefix}…" and secret not in "".join(rows[1])

    rows, _ = listing("--all")
    assert [(row[0], row[-1]) for row in rows[1:]] == [
        (str(working.pk), "active"),
        (str(revoked.pk), "revoked"),
        (str(expired.pk), "expired"),
    ]
    rows, _ = listing("bob", "--all")
    assert [row[1] for row in rows[1:]] == ["bob"]
    rows, err = listing("bob")
    assert rows == [] and "No working tokens" in err
    with pytest.raises(CommandError, match="no user 'nobody'"):
        listing("nobody")
