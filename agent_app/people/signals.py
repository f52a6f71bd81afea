"""The signals of people in the loop, where a host project has always found them; they
are defined in ``agent_app.signals``, below every layer that sends or hears them."""

from agent_app.signals import feedback_saved, handoff_requested

__all__ = ["feedback_saved", "handoff_requested"]
