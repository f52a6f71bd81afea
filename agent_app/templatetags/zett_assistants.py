"""``assistant_name``: the name people see for a chat's assistant, in a template.

A filter rather than a ``ChatSession`` property, so the models never ask the assistants
registry (the registry's type hints name the models: the models stay below it).
"""

from __future__ import annotations

from django import template

from agent_app.assistants import registry

register = template.Library()


@register.filter
def assistant_name(assistant_id: str) -> str:
    """``{{ chat.assistant|assistant_name }}``: its display name, or the id if unregistered."""
    return registry.display_name_of(assistant_id or "")
