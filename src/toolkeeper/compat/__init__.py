"""Imports under which programs written for another tool layer run as that layer documents.

``toolkeeper.compat.toolregistry``: ``Tool``, ``ToolMetadata``, ``ToolTag``, ``ToolRegistry``
and the results of ``execute_tool_calls``, with toolregistry's defaults and return values, over
toolkeeper's definitions, formats and invoker.
"""
