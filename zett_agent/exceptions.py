"""Errors raised by the runtime.

::

    Exception
     └── AgentError                      anything the runtime itself raises
          ├── AgentProtocolError         an API used against its rules: illegal phase move,
          │                              invalid model stream, busy session, uninitialized agent
          └── AgentIterationLimitError   one input needed more model calls than max_iterations

Model and hook failures are not wrapped: the original exception object reaches the caller.
Tool failures never raise; they become unsuccessful ``ToolMessage`` results.
"""

__all__ = ["AgentError", "AgentIterationLimitError", "AgentProtocolError"]


class AgentError(Exception):
    """Base class of every error raised by the runtime itself."""


class AgentProtocolError(AgentError):
    """The runtime, a model or an extension broke a rule of the agent protocol."""


class AgentIterationLimitError(AgentError):
    """One input took more model calls than the agent's ``max_iterations``."""
