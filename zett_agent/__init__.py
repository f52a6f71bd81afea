"""zett_agent: an asyncio agent runtime.

Import each public name from the module that defines it, e.g.
``from zett_agent.agent import Agent``. This package module stays light on purpose.
"""

__version__ = "0.1.0"
