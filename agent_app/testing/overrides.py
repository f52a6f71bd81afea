"""``override_assistant``: a registered assistant with another model, tools or instructions,
for the length of a ``with`` block, a test function or a test class.

The override registers, under the same id, an instance of a subclass of the assistant that
is registered at the time, with the given parts replaced (its ``get_model``,
``get_tools`` and ``get_instructions`` too, so an assistant that computes them is
overridden all the same); everything else — permissions, approvals, extensions — is the
assistant's own. On exit the very instance that was registered before is put back.

A chat builds its agent from its assistant when the chat first goes live in the process,
so enter the override before the chat's first message (the kit's ``ChatClient`` opens a
fresh chat for each client).
"""

from __future__ import annotations

import functools
import inspect
import unittest
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agent_app.assistants import Assistant, UnknownAssistant, registry

__all__ = ["override_assistant"]

F = TypeVar("F", bound=Callable[..., Any])

_UNSET: Any = object()


class override_assistant:
    """Replace parts of the assistant registered as ``assistant_id`` while it is active.

    ``model``: an ``AgentModel`` (e.g. a ``ScriptModel``) or a ``ZETT_MODEL`` spec;
    ``tools``: the assistant's tools instead of its own; ``instructions``: its system
    prompt. Use it as ``with override_assistant("support", model=m):``, as a decorator of
    a test function (sync or async) or of a ``unittest.TestCase`` class (each of its tests).
    """

    def __init__(
        self,
        assistant_id: str,
        *,
        model: Any = _UNSET,
        tools: Sequence[Any] = _UNSET,
        instructions: str = _UNSET,
    ) -> None:
        if instructions is not _UNSET and not isinstance(instructions, str):
            raise TypeError(f"instructions must be a string, got {type(instructions).__name__}")
        if tools is not _UNSET and (isinstance(tools, str) or not isinstance(tools, Sequence)):
            raise TypeError(f"tools must be a list of tools, got {tools!r}")
        self.assistant_id = assistant_id
        self.model = model
        self.tools = tools
        self.instructions = instructions
        self._replaced: list[Assistant] = []

    def _overridden(self, current: Assistant) -> Assistant:
        base = type(current)
        parts: dict[str, Any] = {"__module__": base.__module__, "__qualname__": base.__qualname__}
        if self.model is not _UNSET:
            parts["model"] = self.model
            parts["get_model"] = Assistant.get_model
        if self.tools is not _UNSET:
            tools = list(self.tools)
            parts["tools"] = tools
            parts["get_tools"] = lambda assistant: list(tools)
        if self.instructions is not _UNSET:
            instructions = self.instructions
            parts["instructions"] = instructions
            parts["get_instructions"] = lambda assistant, chat: instructions
        return type(base.__name__, (base,), parts)()

    def enable(self) -> None:
        """Start the override (``with`` and the decorators call it)."""
        current = registry.get(self.assistant_id)
        if current is None:
            raise UnknownAssistant(self.assistant_id)
        self._replaced.append(registry.swap(self.assistant_id, self._overridden(current)))

    def disable(self) -> None:
        """End the override: the assistant registered before is registered again."""
        registry.swap(self.assistant_id, self._replaced.pop())

    def __enter__(self) -> Assistant:
        self.enable()
        return registry.resolve(self.assistant_id)

    def __exit__(self, *exc_info: object) -> None:
        self.disable()

    def __call__(self, target: F) -> F:
        if isinstance(target, type):
            return self._decorate_class(target)
        if inspect.iscoroutinefunction(target):

            @functools.wraps(target)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await target(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(target)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                return target(*args, **kwargs)

        return run  # type: ignore[return-value]

    def _decorate_class(self, cls: Any) -> Any:
        """Each test of the class runs with the override (entered in ``setUp``, so the
        assistants the test's own fixtures register are there already)."""
        if not issubclass(cls, unittest.TestCase):
            raise TypeError(
                f"override_assistant decorates functions and unittest.TestCase classes, "
                f"not {cls.__qualname__}"
            )
        set_up = cls.setUp
        override = self

        def setUp(test: Any) -> None:
            override.enable()
            test.addCleanup(override.disable)
            set_up(test)

        cls.setUp = setUp
        return cls
