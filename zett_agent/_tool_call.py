"""One local tool call: run it through the ``on_tool_call`` onion and turn it into a result.

The first extension is the outermost layer. Each layer's ``call_next`` returns what the
layer inside it returned (the handler's own value at the centre), so middleware can
transform a result; ``call_next()`` with no argument passes on the call the layer received
(arguments it edited included), ``call_next(other)`` another one. The outermost value
becomes the ``ToolResult`` (``to_tool_result``). Any ``Exception`` on the way (an unknown
tool, invalid arguments, the handler, a layer) is a failed result, not a failed request;
cancellation is not caught.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from zett_agent.tools.base import ToolResult, to_tool_result

if TYPE_CHECKING:
    from zett_agent._context import AgentRunContext
    from zett_agent.extensions.base import AgentExtension
    from zett_agent.messages import ToolCall
    from zett_agent.tools.base import AgentTool

__all__ = ["execute_tool", "failed_result", "find_tool"]


async def execute_tool(
    context: AgentRunContext, layers: tuple[AgentExtension, ...], call: ToolCall
) -> tuple[ToolResult, Exception | None]:
    """The call's result, and the exception when it failed.

    With no layer (the common case) the tool is awaited directly, without building the
    onion's centre as a coroutine of its own.
    """
    try:
        if layers:

            async def invoke(requested: ToolCall) -> Any:
                return await find_tool(context, requested.name).invoke(requested.arguments)

            run: Callable[[ToolCall], Awaitable[Any]] = invoke
            for extension in reversed(layers):
                run = _layer(extension, context, run)
            value = await run(call)
        else:
            value = await find_tool(context, call.name).invoke(call.arguments)
        result = to_tool_result(value)
    except Exception as error:
        return failed_result(error), error
    return result, None


def failed_result(error: Exception) -> ToolResult:
    """The result of a call that raised ``error``."""
    return ToolResult(error_text(error), success=False)


def find_tool(context: AgentRunContext, name: str) -> AgentTool:
    """The request's tool of that name; ``LookupError`` (a failed call) when there is none."""
    tool = context.tools.get(name)
    if tool is None:
        available = ", ".join(sorted(context.tools)) or "none"
        raise LookupError(f"Unknown tool {name!r}; available tools: {available}")
    return tool


def _layer(
    extension: AgentExtension,
    context: AgentRunContext,
    inner: Callable[[ToolCall], Awaitable[Any]],
) -> Callable[[ToolCall], Awaitable[Any]]:
    def layer(call: ToolCall) -> Awaitable[Any]:
        def call_next(requested: ToolCall | None = None) -> Awaitable[Any]:
            return inner(call if requested is None else requested)

        return extension.on_tool_call(context, call, call_next)

    return layer


def error_text(error: Exception) -> str:
    """What the model reads for a failed call: the error's own text (its type when empty)."""
    return str(error) or type(error).__name__
