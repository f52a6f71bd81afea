"""The demo assistant's tools: exact arithmetic, the current time, saving a note.

They are real (the calculator is exact, the note is a database row) and harmless (nothing
leaves the process). ``save_note`` has an effect the user should consent to, so it is listed
in ``TOOLS_NEEDING_APPROVAL``, the demo assistant's ``approval_required``
(``zett_site.assistants``).

The tools are built once and shared by every session's agent (``@tool`` builds a pydantic
model per tool): ``save_note`` learns its session from the run that calls it.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation, localcontext
from fractions import Fraction
from typing import TYPE_CHECKING, Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from zett_agent.tools.base import AgentTool, current_run_context, tool

if TYPE_CHECKING:
    from zett_site.models import Note

__all__ = [
    "TOOLS_NEEDING_APPROVAL",
    "CalculationError",
    "calculate",
    "current_time",
    "demo_tools",
    "evaluate",
    "format_number",
    "save_note",
]

#: Names of the tools that run only after the user approved the call.
TOOLS_NEEDING_APPROVAL = frozenset({"save_note"})

#: Bounds that keep one expression from eating the CPU or memory of the server.
MAX_EXPRESSION_LENGTH = 500
MAX_EXPONENT = 10_000
#: Below Python's 4300-digit limit on int-to-text conversion, so every result can be shown.
MAX_DIGITS = 4_000
_MAX_BITS = int(MAX_DIGITS * 3.32)  # log2(10) ≈ 3.32 bits per decimal digit
#: Significant digits shown for a result that has no finite decimal expansion.
APPROXIMATION_DIGITS = 30


class CalculationError(ValueError):
    """The expression is not plain arithmetic, or cannot be computed exactly."""


_BINARY: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: lambda a, b: Fraction(a // b),
    ast.Mod: operator.mod,
}


def evaluate(expression: str) -> Fraction:
    """Evaluate ``+ - * / // % **`` and parentheses over exact rationals.

    Only literals and those operators are accepted: the expression is parsed by ``ast``
    and walked here, never handed to ``eval``. Decimal literals are read exactly
    (``0.1`` is one tenth, not the nearest float).
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalculationError(
            f"Expression is {len(expression)} characters; the limit is {MAX_EXPRESSION_LENGTH}"
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculationError(f"Not an arithmetic expression: {exc.msg}") from None
    return _walk(tree.body)


def _walk(node: ast.expr) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _exact(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _walk(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp):
        left, right = _walk(node.left), _walk(node.right)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        if isinstance(node.op, ast.BitXor):
            raise CalculationError("'^' is not a power here: write 2**10 for two to the tenth")
        apply = _BINARY.get(type(node.op))
        if apply is None:
            raise CalculationError(f"Unsupported operator {type(node.op).__name__}")
        if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
            raise CalculationError("Division by zero")
        return _bounded(apply(left, right))
    raise CalculationError(
        f"Only numbers, + - * / // % ** and parentheses are allowed, got {ast.unparse(node)!r}"
    )


def _exact(node: ast.Constant) -> Fraction:
    if isinstance(node.value, int):
        return Fraction(node.value)
    # The source text, not the float, holds the exact value the user wrote.
    source = ast.unparse(node)
    try:
        return Fraction(Decimal(source))
    except (InvalidOperation, ValueError):
        raise CalculationError(f"Cannot read the number {source!r} exactly") from None


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise CalculationError("Only whole-number exponents give exact results")
    if abs(exponent) > MAX_EXPONENT:
        raise CalculationError(f"Exponent {exponent} is larger than {MAX_EXPONENT}")
    if base == 0 and exponent < 0:
        raise CalculationError("Division by zero")
    bits = max(base.numerator.bit_length(), base.denominator.bit_length())
    if (bits - 1) * abs(exponent.numerator) > _MAX_BITS:
        raise CalculationError(f"The result would have more than {MAX_DIGITS} digits")
    return _bounded(base ** int(exponent))


def _bounded(value: Fraction) -> Fraction:
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > _MAX_BITS:
        raise CalculationError(f"The result would have more than {MAX_DIGITS} digits")
    return value


def format_number(value: Fraction) -> str:
    """Integers as integers, terminating fractions as exact decimals, others as ``p/q (≈ d)``."""
    if value.denominator == 1:
        return str(value.numerator)
    denominator = value.denominator
    exponents = []
    for prime in (2, 5):
        count = 0
        while denominator % prime == 0:
            denominator //= prime
            count += 1
        exponents.append(count)
    if denominator == 1 and max(exponents) <= MAX_DIGITS:
        # p / (2^a 5^b) has exactly max(a, b) decimal places.
        places = max(exponents)
        scaled = abs(value * 10**places).numerator
        whole, fraction = divmod(scaled, 10**places)
        sign = "-" if value < 0 else ""
        return f"{sign}{whole}.{fraction:0{places}d}"
    with localcontext(prec=APPROXIMATION_DIGITS + 5):
        approximate = Decimal(value.numerator) / Decimal(value.denominator)
        shown = f"{approximate:.{APPROXIMATION_DIGITS}g}"
    return f"{value.numerator}/{value.denominator} (≈ {shown})"


@tool(idempotent=True)
def calculate(expression: Annotated[str, Field(min_length=1, max_length=MAX_EXPRESSION_LENGTH)]):
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: Numbers with + - * / // % ** and parentheses, e.g. "12*(3+4)/5".

    Snippet:
        calculate(expression="(1.1 + 2.2) * 3")

    Guidelines:
        - Use for every calculation instead of doing arithmetic in your head.
        - Write powers as ** (2**10); ^ is refused.
        - Report the result exactly as returned; fractions come with a decimal approximation.
    """
    return format_number(evaluate(expression))


@tool(idempotent=True)
def current_time(timezone: str | None = None) -> str:
    """Tell the current date and time.

    Args:
        timezone: An IANA time zone such as "Europe/Paris"; UTC when omitted.

    Snippet:
        current_time(timezone="Asia/Tokyo")

    Guidelines:
        - Use whenever the answer depends on today's date or the time of day.
        - Pass an IANA zone name (Region/City), not an abbreviation like CET.
    """
    if timezone is None or not timezone.strip():
        zone = UTC
    else:
        try:
            zone = ZoneInfo(timezone.strip())
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"Unknown time zone {timezone!r}; use an IANA name like 'Europe/Paris'"
            ) from None
    now = datetime.now(zone)
    return f"{now.isoformat(timespec='seconds')} ({now.tzname()}, {now:%A %d %B %Y})"


@tool(atomic=True)
def save_note(
    title: Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S")],
    text: Annotated[str, Field(min_length=1, max_length=10_000, pattern=r"\S")],
) -> str:
    """Save a note in the database for the user.

    Args:
        title: A short title for the note.
        text: The note itself.

    Snippet:
        save_note(title="Groceries", text="Milk, eggs, bread")

    Guidelines:
        - Use only when the user asks to save, keep or remember something.
        - The user must approve each note; if they deny it, say so and do not retry.
    """
    # Atomic: the note and the record of this call's result commit together, so after a
    # crash the note exists exactly once.
    note = _store_note(current_run_context().session_id, title.strip(), text)
    return f"Saved note #{note.pk}: {note.title}"


def _store_note(session_id: str, title: str, text: str) -> Note:
    from agent_app.models import ChatSession
    from zett_site.models import Note

    session = ChatSession.objects.filter(pk=session_id).first()
    return Note.objects.create(session=session, title=title, text=text)


def demo_tools() -> list[AgentTool]:
    """The demo assistant's tools (the same objects for every chat)."""
    return [calculate, current_time, save_note]
