"""``@tool(idempotent=True)`` / ``@tool(atomic=True)``: flags a host reads after a crash."""

from __future__ import annotations

import pytest

from zett_agent.tools import tool


def test_the_flags_default_to_neither_and_are_carried():
    @tool
    def plain(x: int) -> int:
        """Plain.

        Guidelines:
            Use it.
        """
        return x

    @tool(idempotent=True)
    def again(x: int) -> int:
        """Again.

        Guidelines:
            Use it.
        """
        return x

    @tool(atomic=True)
    def writes(x: int) -> int:
        """Writes.

        Guidelines:
            Use it.
        """
        return x

    assert (plain.idempotent, plain.atomic) == (False, False)
    assert (again.idempotent, again.atomic) == (True, False)
    assert (writes.idempotent, writes.atomic) == (False, True)


def test_an_atomic_tool_must_be_sync():
    with pytest.raises(TypeError, match="atomic, so it must be a plain"):

        @tool(atomic=True)
        async def writes(x: int) -> int:
            """Writes.

            Guidelines:
                Use it.
            """
            return x
