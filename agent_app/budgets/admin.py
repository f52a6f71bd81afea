"""The admin's view of the budgets: tokens per person per day, read-only.

Registered from ``agent_app.admin``. The rows are written only by ``agent_app.budgets.ledger``
(an edited row would make the day's numbers lie), so nothing here changes them; deleting a
row gives that person their day's budget back.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from agent_app.budgets.ledger import limit_for
from agent_app.guard.access import Person
from agent_app.models import TokenUsage

__all__ = ["TokenUsageAdmin"]


def _person(row: TokenUsage) -> Person:
    if row.user_id is not None:
        return Person(row.user_id)
    return Person(None, row.person.removeprefix("browser:"))


@admin.register(TokenUsage)
class TokenUsageAdmin(admin.ModelAdmin):
    """One row per person per day: what they used, of how much, and refusals."""

    list_display = [
        "day",
        "person",
        "user",
        "input_tokens",
        "output_tokens",
        "total",
        "limit",
        "remaining",
        "calls",
        "refusals",
    ]
    list_filter = ["day"]
    search_fields = ["person", "user__username"]
    date_hierarchy = "day"
    list_select_related = ["user"]
    readonly_fields = [field.name for field in TokenUsage._meta.fields]

    @admin.display(description="total tokens")
    def total(self, row: TokenUsage) -> int:
        return row.total_tokens

    @admin.display(description="daily budget")
    def limit(self, row: TokenUsage) -> str:
        found = limit_for(_person(row))
        return "no limit" if found is None else f"{found:,}"

    @admin.display(description="remaining today")
    def remaining(self, row: TokenUsage) -> str:
        found = limit_for(_person(row))
        return "—" if found is None else f"{max(found - row.total_tokens, 0):,}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
