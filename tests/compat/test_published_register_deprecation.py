"""toolregistry's published tests (test_register_deprecation.py), run against toolkeeper's import of
its API.

Adapted from Oaklight/ToolRegistry tests/test_register_deprecation.py (version 0.19.0).
Copyright (c) 2025 Peng Ding, MIT License: see tests/compat/TOOLREGISTRY_LICENSE.
Changes: the import of ``toolregistry`` became ``toolkeeper.compat.toolregistry`` (imports
sorted, unused ones removed); ``@pytest.mark.asyncio`` dropped (async tests run on anyio
here); left out, each for a reason:

- ``test_register_from_mcp_warns``: MCP servers are toolkeeper's MCPGateway.
- ``test_register_from_openapi_warns``: OpenAPI sources are not offered.
- ``test_register_from_langchain_warns``: LangChain sources are toolkeeper's adapters.
"""

from __future__ import annotations

import warnings

from toolkeeper.compat.toolregistry import ToolRegistry


class SampleClass:
    @staticmethod
    def add(a: int, b: int) -> int:
        return a + b


# ------------------------------------------------------------------ #
#  Sync deprecation warnings                                          #
# ------------------------------------------------------------------ #


class TestDeprecationWarnings:
    def test_register_from_class_warns(self):
        reg = ToolRegistry()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            reg.register_from_class(SampleClass)
        dep_warnings = [x for x in w if issubclass(x.category, DeprecationWarning)]
        assert len(dep_warnings) >= 1
        assert "register_from_class" in str(dep_warnings[0].message)
        assert "register(" in str(dep_warnings[0].message)

    def test_register_from_class_still_works(self):
        reg = ToolRegistry()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            reg.register_from_class(SampleClass)
        assert any("add" in n for n in reg._tools)





# ------------------------------------------------------------------ #
#  Async deprecation warnings                                        #
# ------------------------------------------------------------------ #


class TestAsyncDeprecationWarnings:
    async def test_register_from_class_async_warns(self):
        reg = ToolRegistry()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            await reg.register_from_class_async(SampleClass)
        dep_warnings = [x for x in w if issubclass(x.category, DeprecationWarning)]
        assert len(dep_warnings) >= 1
        assert "register_from_class_async" in str(dep_warnings[0].message)
    async def test_register_from_class_async_still_works(self):
        reg = ToolRegistry()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            await reg.register_from_class_async(SampleClass)
        assert any("add" in n for n in reg._tools)
