"""The check of a schedule's assistant, apart from the model (the registry imports the
models): an installed assistant that the schedule's owner may use."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from agent_app.assistants import registry

__all__ = ["check_assistant"]


def check_assistant(assistant_id: str, owner: Any) -> None:
    """``ValidationError`` unless ``assistant_id`` is installed and ``owner`` may use it."""
    assistant = registry.get(assistant_id)
    if assistant is None:
        raise ValidationError(
            f"No assistant {assistant_id!r} is installed (there are: {', '.join(registry.ids())})"
        )
    if owner is not None and not assistant.has_permission(owner):
        raise ValidationError(f"{owner} may not use the assistant {assistant.display_name!r}")
