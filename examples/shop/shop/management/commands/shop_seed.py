"""``manage.py shop_seed``: the people and orders the README's walk-through uses.

alice (a customer with orders 7 and 9) and bob (staff, with ``shop.view_order``, so he
may also chat with the Sales desk), each with the password printed. Run it again and it
changes nothing: the users and orders it finds are kept as they are.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand

from shop.models import Order

PEOPLE = {"alice": "alice-pw-123", "bob": "bob-pw-123"}
ORDERS = [
    (7, "alice", "Red shoes", 8990),
    (9, "alice", "Wool socks", 1290),
    (8, "bob", "Boots", 12000),
]


class Command(BaseCommand):
    help = "Create the example's users (alice, bob) and their orders; safe to run again."

    def handle(self, *args: Any, **options: Any) -> None:
        users = {}
        for username, password in PEOPLE.items():
            user, created = get_user_model().objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.save()
            users[username] = user
            self.stdout.write(f"{username} / {password}" + ("" if created else " (kept as it was)"))
        users["bob"].user_permissions.add(Permission.objects.get(codename="view_order"))
        for number, owner, item, cents in ORDERS:
            Order.objects.get_or_create(
                number=number,
                defaults={"customer": users[owner], "item": item, "total_cents": cents},
            )
        self.stdout.write(f"{Order.objects.count()} orders. Sign in at /accounts/login/.")
