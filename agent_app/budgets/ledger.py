"""The token ledger: one row per person and day, and every budget decision made under its lock.

A budget (``ZETT_TOKEN_BUDGETS``) is input + output tokens per person per calendar day, the
day of Django's ``TIME_ZONE``: it resets at midnight there (``resets_at``). A person is a
signed-in user or an anonymous browser (``agent_app.guard.access.Person``); ``limit_for``
says which number applies to them.

**Exact under concurrency.** What a model call costs is known only once it has ended, and
one person may run calls at once (several chats, tabs, workers). So each call is
*admitted* before it starts, in one transaction on the person's ``TokenUsage`` row of the
day, and holds a *reservation* until it *settles* (one ``UPDATE`` of ``F()`` sums):

- **refused** when the day's used tokens have reached the limit;
- **admitted** when no call is in flight, or when the used tokens plus what the calls in
  flight reserved are still below the limit. It reserves the person's typical call
  (``call_estimate``, the mean of their calls, carried over from their previous day); with
  no estimate yet, the whole remainder, so the first call is measured before another is
  let in beside it;
- otherwise **undecided**: the caller waits for a call to settle and asks again
  (``agent_app.budgets.admission``).

So exactly the calls that one person calling one after the other would have made are
made: the last one may cross the limit, by at most one call's worth (more only when calls
in flight cost more than the person's typical call). The row is locked by a write before
it is read (``UPDATE … SET calls = calls``), which takes PostgreSQL's row lock and
SQLite's database write lock alike, so two workers never decide on the same numbers.

A reservation whose worker died mid-call would hold for ever: reservations lapse
``RESERVATION_SECONDS`` after the latest admission (the next decision drops them), and a
late settle never takes a count below zero.

The budgets import neither ``agent_app.models`` nor ``agent_app.guard.access`` (the rows are
looked up through the app registry, people are anything with ``user_id`` and ``key``): the
agent factory and the run import this package, and it must not close an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Protocol

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from agent_app import conf
from agent_app.protocol.frames import BudgetExceededFrame, ErrorCode, Refusal

__all__ = [
    "RESERVATION_SECONDS",
    "Budget",
    "BudgetExceeded",
    "Person",
    "Ticket",
    "budget_of",
    "budget_problems",
    "check_budget",
    "clock",
    "day_of",
    "limit_for",
    "person_of_session",
    "release",
    "resets_at",
    "settle",
    "try_admit",
]

#: How long a call's reservation holds without a newer admission (a call that outlives it
#: still settles what it used).
RESERVATION_SECONDS = 300


class Person(Protocol):
    """Whose budget: ``agent_app.guard.access.Person`` (a user, or an anonymous browser)."""

    @property
    def user_id(self) -> int | None: ...

    @property
    def key(self) -> str: ...


@dataclass(frozen=True, slots=True)
class _Owner:
    """The person a stored chat belongs to (the same ``key`` as ``guard.access.Person``)."""

    user_id: int | None
    browser_key: str

    @property
    def key(self) -> str:
        return f"user:{self.user_id}" if self.user_id is not None else f"browser:{self.browser_key}"


def _rows() -> Any:
    """The ``TokenUsage`` model (``agent_app.models``), through the app registry."""
    return apps.get_model("agent_app", "TokenUsage")


def person_of_session(session_id: str) -> Person | None:
    """The person a stored chat belongs to; None for a chat not stored or owned by nobody."""
    chats = apps.get_model("agent_app", "ChatSession").objects
    found = chats.filter(pk=session_id).values_list("owner_id", "browser_key").first()
    if found is None or (found[0] is None and not found[1]):
        return None
    return _Owner(found[0], "" if found[0] is not None else found[1])


def clock() -> datetime:
    """Now. The one clock of the budgets: tests replace it to move to another day."""
    return timezone.now()


def day_of(moment: datetime) -> date:
    """The budget day ``moment`` falls on (in ``TIME_ZONE``)."""
    return timezone.localdate(moment)


def resets_at(day: date) -> datetime:
    """When the budget of ``day`` resets: the next midnight in ``TIME_ZONE``."""
    return timezone.make_aware(datetime.combine(day + timedelta(days=1), time.min))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class BudgetExceeded(Refusal):
    """The person's token budget of the day is used up; it resets at ``resets_at``."""

    def __init__(self, limit: int, used: int, reset: datetime) -> None:
        super().__init__(
            ErrorCode.BUDGET_EXCEEDED,
            f"You have used your {limit:,} tokens for today; the budget resets at {_iso(reset)}",
        )
        self.limit = limit
        self.used = used
        self.resets_at = reset

    def frame(self) -> BudgetExceededFrame:
        return BudgetExceededFrame(
            message=self.message, resets_at=_iso(self.resets_at), limit=self.limit, used=self.used
        )


@dataclass(frozen=True, slots=True)
class Budget:
    """A person's budget of one day, as the composer and ``check_budget`` read it."""

    limit: int
    used: int
    resets_at: datetime

    @property
    def remaining(self) -> int:
        return max(self.limit - self.used, 0)

    def as_dict(self) -> dict[str, Any]:
        """The fields of the ``budget`` frame."""
        return {
            "limit": self.limit,
            "used": self.used,
            "remaining": self.remaining,
            "resets_at": _iso(self.resets_at),
        }


@dataclass(frozen=True, slots=True)
class Ticket:
    """An admitted call's hold on its person-day row, until it settles."""

    row_id: int
    person: str
    day: date
    #: Tokens it reserved.
    reserved: int


# --- who gets how much -----------------------------------------------------------------


def _is_budget(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def budget_problems() -> list[str]:
    """What is wrong with ``ZETT_TOKEN_BUDGETS`` (``manage.py check``), one line a problem."""
    budgets = conf.ZETT_TOKEN_BUDGETS
    if budgets is None:
        return []
    if not isinstance(budgets, dict):
        return [f"must be a dict or None, got {budgets!r}"]
    problems = [
        f"has an unknown key {key!r} (known: 'user', 'anonymous', 'groups')"
        for key in budgets
        if key not in ("user", "anonymous", "groups")
    ]
    for key in ("user", "anonymous"):
        if not _is_budget(budgets.get(key)):
            problems.append(f"[{key!r}] must be tokens per day (an int >= 0) or None")
    groups = budgets.get("groups") or {}
    if not isinstance(groups, dict):
        problems.append(f"['groups'] must map group names to tokens per day, got {groups!r}")
        groups = {}
    for name, value in groups.items():
        if not isinstance(name, str) or not _is_budget(value):
            problems.append(f"['groups'][{name!r}] must be tokens per day (an int >= 0) or None")
    return problems


def _group_names(user_id: int) -> list[str]:
    user_model = get_user_model()
    if not any(field.name == "groups" for field in user_model._meta.get_fields()):
        return []  # a custom user model without groups
    return list(
        user_model._meta.get_field("groups")
        .related_model.objects.filter(user__pk=user_id)
        .values_list("name", flat=True)
    )


def limit_for(person: Person) -> int | None:
    """The person's tokens per day; None: no budget applies.

    An anonymous browser gets ``"anonymous"``. A signed-in user in budgeted groups gets the
    largest of their groups' budgets (a group set to None: no limit), whether it is above
    or below ``"user"``; a user in none of them gets ``"user"``. A key left out: no limit.
    """
    budgets = conf.ZETT_TOKEN_BUDGETS
    if not budgets:
        return None
    if person.user_id is None:
        return budgets.get("anonymous")
    groups = budgets.get("groups") or {}
    if groups:
        found = [groups[name] for name in _group_names(person.user_id) if name in groups]
        if found:
            return None if None in found else max(found)
    return budgets.get("user")


# --- the row ---------------------------------------------------------------------------


def _locked_row(person: Person, day: date) -> Any:
    """The person's row of ``day`` (created if need be), locked for the transaction."""
    key = person.key
    row_id = _rows().objects.filter(person=key, day=day).values_list("pk", flat=True).first()
    if row_id is None:
        carried = (
            _rows()
            .objects.filter(person=key, day__lt=day, calls__gt=0)
            .order_by("-day")
            .values_list("call_estimate", flat=True)
            .first()
        )
        try:
            with transaction.atomic():
                row_id = (
                    _rows()
                    .objects.create(
                        person=key, day=day, user_id=person.user_id, call_estimate=carried or 0
                    )
                    .pk
                )
        except IntegrityError:  # another worker created it first
            row_id = _rows().objects.get(person=key, day=day).pk
    _rows().objects.filter(pk=row_id).update(calls=F("calls"))  # the lock
    return _rows().objects.get(pk=row_id)


def budget_of(person: Person, now: datetime | None = None) -> Budget | None:
    """The person's budget today, or None when none applies (reads, locks nothing)."""
    limit = limit_for(person)
    if limit is None:
        return None
    day = day_of(now or clock())
    row = _rows().objects.filter(person=person.key, day=day).first()
    used = row.total_tokens if row is not None else 0
    return Budget(limit, used, resets_at(day))


def check_budget(person: Person, now: datetime | None = None) -> Budget | None:
    """Refuse (``BudgetExceeded``) a person whose budget of today is used up.

    The check before a run starts, for callers that start runs themselves (the HTTP API):
    it reserves nothing, so two runs started at once both pass it; each model call is
    admitted on its own (``agent_app.budgets.admission``). Returns the budget, or None.
    """
    budget = budget_of(person, now)
    if budget is not None and budget.used >= budget.limit:
        raise BudgetExceeded(budget.limit, budget.used, budget.resets_at)
    return budget


# --- decisions -------------------------------------------------------------------------


def try_admit(
    person: Person, limit: int, now: datetime | None = None, *, force: bool = False
) -> Ticket | BudgetExceeded | None:
    """Admit one model call (a ``Ticket``), refuse it, or None: undecided, ask again later.

    ``force``: admit whenever the limit is not reached, whatever is in flight (a caller
    that has waited long enough).
    """
    now = now or clock()
    day = day_of(now)
    with transaction.atomic():
        row = _locked_row(person, day)
        reserved, in_flight = row.reserved_tokens, row.in_flight
        if in_flight and (row.reserved_until is None or row.reserved_until <= now):
            reserved = in_flight = 0  # their workers died: let the reservations lapse
        used = row.total_tokens
        if used >= limit:
            _rows().objects.filter(pk=row.pk).update(
                refusals=F("refusals") + 1, reserved_tokens=reserved, in_flight=in_flight
            )
            return BudgetExceeded(limit, used, resets_at(day))
        estimate = row.call_estimate
        if in_flight and not force and (not estimate or used + reserved >= limit):
            return None
        hold = max(estimate or limit - used, 1)
        _rows().objects.filter(pk=row.pk).update(
            reserved_tokens=reserved + hold,
            in_flight=in_flight + 1,
            reserved_until=now + timedelta(seconds=RESERVATION_SECONDS),
        )
    return Ticket(row.pk, person.key, day, hold)


def settle(ticket: Ticket, input_tokens: int = 0, output_tokens: int = 0) -> None:
    """Count what an admitted call used and give its reservation back (one statement)."""
    spent = max(input_tokens, 0) + max(output_tokens, 0)
    fields: dict[str, Any] = {
        "reserved_tokens": Greatest(F("reserved_tokens") - ticket.reserved, 0),
        "in_flight": Greatest(F("in_flight") - 1, 0),
    }
    if spent:
        fields.update(
            input_tokens=F("input_tokens") + max(input_tokens, 0),
            output_tokens=F("output_tokens") + max(output_tokens, 0),
            calls=F("calls") + 1,
            # The mean call of the day, this one included (integer division on both
            # backends: the operands are integer columns).
            call_estimate=(F("input_tokens") + F("output_tokens") + spent) / (F("calls") + 1),
            updated_at=timezone.now(),
        )
    _rows().objects.filter(pk=ticket.row_id).update(**fields)


def release(ticket: Ticket) -> None:
    """Give back the reservation of a call that was never made."""
    settle(ticket)
