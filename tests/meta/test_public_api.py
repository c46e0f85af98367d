"""The public surface is deliberate: one sorted ``__all__``, every name importable and documented."""

from __future__ import annotations

import inspect

import toolkeeper

# The names of the foundation: definitions, results, risk and calls.
FOUNDATION_NAMES = {
    "tool", "Tool", "BaseTool", "HostedTool", "ProviderDefinedTool", "is_hosted_tool",
    "is_provider_defined_tool", "FunctionSpec", "ProviderSpec", "ToolMetadata", "ToolResult",
    "TextBlock", "ImageBlock", "ToolExecutionResult", "ToolRisk", "HitlMode", "ToolCall",
}


def test_all_is_sorted_and_unique() -> None:
    assert list(toolkeeper.__all__) == sorted(set(toolkeeper.__all__))


def test_every_public_name_is_importable() -> None:
    for name in toolkeeper.__all__:
        assert hasattr(toolkeeper, name), name


def test_design_names_of_the_foundation_are_public() -> None:
    assert set(toolkeeper.__all__) >= FOUNDATION_NAMES


def test_every_public_class_and_function_has_a_docstring() -> None:
    undocumented = [
        name for name in toolkeeper.__all__
        if (inspect.isclass(getattr(toolkeeper, name)) or inspect.isfunction(getattr(toolkeeper, name)))
        and not (getattr(toolkeeper, name).__doc__ or "").strip()
    ]
    assert undocumented == []


def test_tool_execution_result_is_tool_result() -> None:
    assert toolkeeper.ToolExecutionResult is toolkeeper.ToolResult


def test_tool_methods_of_the_design_exist() -> None:
    for method in ("from_function", "get_schema", "run", "arun", "run_raw", "arun_raw",
                   "update_namespace", "with_namespace", "replace", "validate_arguments",
                   "execute", "get_openai_schema", "get_mcp_schema", "check"):
        assert callable(getattr(toolkeeper.Tool, method)), method
    assert isinstance(inspect.getattr_static(toolkeeper.Tool, "qualified_name"), property)


def test_design_names_of_the_built_ins_and_config_are_public() -> None:
    assert {"SecurityPolicy", "default_tools", "all_tools_with_runtime",
            "load_config"} <= set(toolkeeper.__all__)
    assert toolkeeper.load_config().security.autonomy == "supervised"

