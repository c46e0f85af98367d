"""What a tools module offers beside its tools: prompts (``@prompt``) and resources and resource
templates (``@resource``), with the skills and each client's artifacts among them — plain data a
server turns into its wire's messages (``toolkeeper serve``: MCP's prompts and resources)."""

from .prompts import Prompt, Prompts, prompt
from .resources import Resource, Resources, resource

__all__ = ["Prompt", "Prompts", "Resource", "Resources", "prompt", "resource"]
