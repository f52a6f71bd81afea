"""Local tools the model may call. See ``zett_agent.tools.base``."""

from zett_agent.tools.base import (
    AgentTool,
    ToolResult,
    current_tool_call_id,
    render_tool_guidance,
    tool,
)

__all__ = ["AgentTool", "ToolResult", "current_tool_call_id", "render_tool_guidance", "tool"]
