"""toolregistry's API over toolkeeper: a program written for toolregistry changes one import::

    from toolkeeper.compat.toolregistry import Tool, ToolRegistry

(``toolkeeper.compat.toolregistry.tool`` and ``.tool_registry`` mirror that package's modules)
and behaves as toolregistry documents — its defaults, return values and errors — while its
declarations are toolkeeper's exports and its calls go through toolkeeper's invoker. What is not
offered here (MCP, OpenAPI and LangChain sources, the admin server, permission policies, tool
discovery, process pools) and what differs is listed in docs/compat.md.
"""

from .metadata import ToolMetadata, ToolTag
from .results import ErrorResult, ResultList, ToolCallResult
from .tool import Tool
from .tool_registry import ToolRegistry

__all__ = ["ErrorResult", "ResultList", "Tool", "ToolCallResult", "ToolMetadata", "ToolRegistry",
           "ToolTag"]
