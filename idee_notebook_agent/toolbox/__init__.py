"""Tool specs (JSON), skills (YAML), server-side executors and the registry that joins them."""

from .registry import ToolContext, ToolRegistry, server_tool
from .skills import Skill, load_skills
from .specs import ToolSpec, load_tool_specs

__all__ = [
    "Skill",
    "ToolContext",
    "ToolRegistry",
    "ToolSpec",
    "load_skills",
    "load_tool_specs",
    "server_tool",
]
