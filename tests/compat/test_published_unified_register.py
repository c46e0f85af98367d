"""toolregistry's published tests (test_unified_register.py), run against toolkeeper's import of
its API.

Adapted from Oaklight/ToolRegistry tests/test_unified_register.py (version 0.19.0).
Copyright (c) 2025 Peng Ding, MIT License: see tests/compat/TOOLREGISTRY_LICENSE.
Changes: the import of ``toolregistry`` became ``toolkeeper.compat.toolregistry`` (imports
sorted, unused ones removed); ``@pytest.mark.asyncio`` dropped (async tests run on anyio
here); left out, each for a reason:

- ``TestMCPSource``: MCP servers are toolkeeper's MCPGateway, not a registry source.
- ``TestOpenAPISource``: OpenAPI sources are not offered.
- ``TestLangChainSource``: LangChain sources are toolkeeper's adapters.
- ``test_async_mcp``: MCP servers are toolkeeper's MCPGateway, not a registry source.
- ``test_async_openapi_missing_spec``: OpenAPI sources are not offered.
"""

from __future__ import annotations

import pytest

from toolkeeper.compat.toolregistry import Tool, ToolRegistry

# ------------------------------------------------------------------ #
#  Fixtures                                                           #
# ------------------------------------------------------------------ #


def sample_func(x: int) -> int:
    """Double a number."""
    return x * 2


class SampleClass:
    @staticmethod
    def add(a: int, b: int) -> int:
        return a + b

    @staticmethod
    def sub(a: int, b: int) -> int:
        return a - b


class InstanceClass:
    def greet(self, name: str) -> str:
        return f"Hello {name}"


# ------------------------------------------------------------------ #
#  Auto-detection: native                                             #
# ------------------------------------------------------------------ #


class TestAutoDetectNative:
    def test_register_function(self):
        reg = ToolRegistry()
        reg.register(sample_func)
        assert "sample_func" in reg._tools

    def test_register_tool_instance(self):
        reg = ToolRegistry()
        tool = Tool.from_function(sample_func, name="my_tool")
        reg.register(tool)
        assert "my_tool" in reg._tools

    def test_register_function_with_description(self):
        reg = ToolRegistry()
        reg.register(sample_func, description="custom desc", name="custom")
        assert "custom" in reg._tools
        assert reg._tools["custom"].description == "custom desc"

    def test_register_function_with_namespace(self):
        reg = ToolRegistry()
        reg.register(sample_func, namespace="ns")
        assert "ns-sample_func" in reg._tools

    def test_register_lambda(self):
        reg = ToolRegistry()
        reg.register(lambda x: x, name="identity")
        assert "identity" in reg._tools

    def test_register_callable_object(self):
        class Adder:
            def __call__(self, a: int, b: int) -> int:
                return a + b

        reg = ToolRegistry()
        reg.register(Adder(), name="adder")
        assert "adder" in reg._tools


# ------------------------------------------------------------------ #
#  Auto-detection: class                                              #
# ------------------------------------------------------------------ #


class TestAutoDetectClass:
    def test_register_class_type(self):
        reg = ToolRegistry()
        reg.register(SampleClass)
        names = list(reg._tools.keys())
        assert any("add" in n for n in names)
        assert any("sub" in n for n in names)

    def test_register_class_instance(self):
        reg = ToolRegistry()
        reg.register(InstanceClass())
        names = list(reg._tools.keys())
        assert any("greet" in n for n in names)

    def test_register_class_with_namespace(self):
        reg = ToolRegistry()
        reg.register(SampleClass, namespace="math")
        names = list(reg._tools.keys())
        assert any(n.startswith("math") for n in names)

    def test_register_class_with_traverse_mro_false(self):
        class Base:
            @staticmethod
            def base_method() -> str:
                return "base"

        class Child(Base):
            @staticmethod
            def child_method() -> str:
                return "child"

        reg = ToolRegistry()
        reg.register(Child, traverse_mro=False)
        names = list(reg._tools.keys())
        assert any("child_method" in n for n in names)
        assert not any("base_method" in n for n in names)


# ------------------------------------------------------------------ #
#  Explicit source                                                    #
# ------------------------------------------------------------------ #


class TestExplicitSource:
    def test_source_native(self):
        reg = ToolRegistry()
        reg.register(sample_func, source="native")
        assert "sample_func" in reg._tools

    def test_source_class(self):
        reg = ToolRegistry()
        reg.register(SampleClass, source="class")
        assert len(reg._tools) == 2

    def test_source_class_with_constructor_kwargs(self):
        class Configurable:
            def __init__(self, factor: int = 1):
                self.factor = factor

            def compute(self, x: int) -> int:
                return x * self.factor

        reg = ToolRegistry()
        reg.register(
            Configurable,
            source="class",
            constructor_kwargs={"factor": 3},
        )
        names = list(reg._tools.keys())
        assert any("compute" in n for n in names)


# ------------------------------------------------------------------ #
#  MCP source (mocked)                                                #
# ------------------------------------------------------------------ #




# ------------------------------------------------------------------ #
#  OpenAPI source (mocked)                                            #
# ------------------------------------------------------------------ #




# ------------------------------------------------------------------ #
#  LangChain source (mocked)                                          #
# ------------------------------------------------------------------ #




# ------------------------------------------------------------------ #
#  Error cases                                                        #
# ------------------------------------------------------------------ #


class TestErrors:
    def test_no_args_raises(self):
        reg = ToolRegistry()
        with pytest.raises(TypeError, match="missing required argument"):
            reg.register()

    def test_unknown_source_raises(self):
        reg = ToolRegistry()
        with pytest.raises(ValueError, match="Unknown source"):
            reg.register(sample_func, source="redis")

    def test_string_without_source_raises(self):
        reg = ToolRegistry()
        with pytest.raises(TypeError, match="Cannot auto-detect"):
            reg.register("http://example.com")

    def test_dict_without_source_raises(self):
        reg = ToolRegistry()
        with pytest.raises(TypeError, match="Cannot auto-detect"):
            reg.register({"command": ["python", "server.py"]})

    def test_path_without_source_raises(self):
        from pathlib import Path

        reg = ToolRegistry()
        with pytest.raises(TypeError, match="Cannot auto-detect"):
            reg.register(Path("server.py"))

    def test_primitive_types_raise(self):
        reg = ToolRegistry()
        for val in [42, 3.14, True, None, b"bytes"]:
            with pytest.raises(TypeError, match="Cannot auto-detect"):
                reg.register(val)

    def test_namespace_true_on_native_raises(self):
        reg = ToolRegistry()
        with pytest.raises(ValueError, match="namespace=True is not supported"):
            reg.register(sample_func, namespace=True)


# ------------------------------------------------------------------ #
#  Async variants                                                     #
# ------------------------------------------------------------------ #


class TestRegisterAsync:
    async def test_async_native_function(self):
        reg = ToolRegistry()
        await reg.register_async(sample_func)
        assert "sample_func" in reg._tools
    async def test_async_class(self):
        reg = ToolRegistry()
        await reg.register_async(SampleClass, source="class")
        assert len(reg._tools) == 2
    async def test_async_no_args_raises(self):
        reg = ToolRegistry()
        with pytest.raises(TypeError, match="missing required argument"):
            await reg.register_async()
    async def test_async_unknown_source_raises(self):
        reg = ToolRegistry()
        with pytest.raises(ValueError, match="Unknown source"):
            await reg.register_async(sample_func, source="redis")




# ------------------------------------------------------------------ #
#  Backward compatibility                                             #
# ------------------------------------------------------------------ #


class TestBackwardCompat:
    def test_positional_description_and_name(self):
        """Old-style positional: register(func, "desc", "name")."""
        reg = ToolRegistry()
        reg.register(sample_func, "my desc", "my_name")
        assert "my_name" in reg._tools
        assert reg._tools["my_name"].description == "my desc"

    def test_keyword_description_and_name(self):
        """Keyword style: register(func, description=..., name=...)."""
        reg = ToolRegistry()
        reg.register(sample_func, description="kw desc", name="kw_name")
        assert "kw_name" in reg._tools
        assert reg._tools["kw_name"].description == "kw desc"

    def test_namespace_none_equals_false(self):
        """namespace=None and namespace=False should both mean no namespace."""
        reg1 = ToolRegistry()
        reg1.register(sample_func, namespace=None, name="t1")

        reg2 = ToolRegistry()
        reg2.register(sample_func, namespace=False, name="t2")

        assert "t1" in reg1._tools
        assert "t2" in reg2._tools

    def test_namespace_true_for_class(self):
        """namespace=True should derive namespace from class name."""
        reg = ToolRegistry()
        reg.register(SampleClass, namespace=True)
        names = list(reg._tools.keys())
        assert any("sample" in n.lower() for n in names)
