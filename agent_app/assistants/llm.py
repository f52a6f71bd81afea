"""Which model answers: a ``ZETT_MODEL`` spec turned into an ``AgentModel``.

``resolve_model`` reads ``ZETT_MODEL`` each time it is called (when a session's first
request builds its agent), so a test's settings override takes effect without reloading
anything:

- ``demo`` → the offline ``DemoModel`` at ``ZETT_DEMO_PACE``;
- anything else → ``zett_agent.providers.load_model``: ``openai:<model>``,
  ``anthropic:<model>``, ``openai-compatible:<model>`` (at ``ZETT_OPENAI_BASE_URL``), or
  ``package.module:attribute`` (a model, or a class or callable building one). The import
  string is also the seam tests use to plug in a scripted model.

It sits with the assistants (an assistant's default model), below the agent factory.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from agent_app import conf
from zett_agent.model import AgentModel
from zett_agent.providers import load_model
from zett_agent.providers.demo import DemoModel

__all__ = ["resolve_model"]


def resolve_model(spec: str | None = None) -> AgentModel:
    """Build the model named by ``spec`` (default ``settings.ZETT_MODEL``).

    ``demo`` is built here so ``settings.ZETT_DEMO_PACE`` applies; every other spec goes
    to ``zett_agent.providers.load_model``, whose errors become ``ImproperlyConfigured``.
    """
    spec = (spec if spec is not None else conf.ZETT_MODEL).strip()
    if spec in ("", "demo"):
        return DemoModel(pace=float(conf.ZETT_DEMO_PACE))
    try:
        return load_model(spec, openai_base_url=conf.ZETT_OPENAI_BASE_URL)
    except ValueError as error:
        raise ImproperlyConfigured(f"ZETT_MODEL={spec!r}: {error}") from error
