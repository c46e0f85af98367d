"""Fixtures of toolregistry's published tests, for their adapted copies here.

Adapted from Oaklight/ToolRegistry tests/conftest.py. Copyright (c) 2025 Peng Ding, MIT License:
see tests/compat/TOOLREGISTRY_LICENSE. Changes: the import of ``toolregistry`` became
``toolkeeper.compat.toolregistry``; a hook expects the deprecation warning the published tests
provoke on purpose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from toolkeeper.compat.toolregistry import Tool, ToolRegistry

# The published tests call register_from_class on purpose: it is the library's own deprecated
# name, and toolkeeper warns as the library does. The warning is expected there and nowhere else
# (the suite turns every other warning into an error); the files stay as published.
_EXPECTED = pytest.mark.filterwarnings(
    r"ignore:register_from_class\(\) is deprecated, use register\(cls:DeprecationWarning")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name.startswith("test_published_"):
            item.add_marker(_EXPECTED)


@pytest.fixture
def sample_function() -> Callable[[int, int], int]:
    def add_numbers(a: int, b: int) -> int:
        """Add two numbers together.

        Args:
            a: First number
            b: Second number

        Returns:
            Sum of a and b
        """
        return a + b

    return add_numbers


@pytest.fixture
def async_sample_function() -> Callable[[int, int], Coroutine[Any, Any, int]]:
    async def async_add_numbers(a: int, b: int) -> int:
        """Add two numbers together asynchronously.

        Args:
            a: First number
            b: Second number

        Returns:
            Sum a and b
        """
        await asyncio.sleep(0)
        return a + b

    return async_add_numbers


@pytest.fixture
def sample_tool(sample_function: Callable[[int, int], int]) -> Tool:
    return Tool.from_function(sample_function)


@pytest.fixture
def sample_registry() -> ToolRegistry:
    return ToolRegistry(name="test_registry")


@pytest.fixture
def populated_registry(sample_registry: ToolRegistry,
                       sample_function: Callable[[int, int], int]) -> ToolRegistry:
    sample_registry.register(sample_function)

    def multiply_numbers(x: float, y: float) -> float:
        """Multiply two numbers."""
        return x * y

    sample_registry.register(multiply_numbers)
    return sample_registry
