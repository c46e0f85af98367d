"""Benchmark: create 1,000 tools from functions, then export their 1,000 OpenAI declarations.

Runs toolkeeper and the installed peers side by side in one process run (``make bench`` installs
the ``bench`` extra). Every library gets its own freshly imported copy of the same 1,000 generated
functions (five typed parameters and a Google-style docstring each), written to a real module so
that libraries reading source code (smolagents) work. Each measurement is the median of
``--rounds`` rounds; a full garbage collection runs before each timed phase. Prints a Markdown
table with ratios against toolkeeper.

    python benchmarks/bench_definitions.py [--count 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

TEMPLATE = '''
def tool_{i}(city: str, days: int, units: str = "metric", verbose: bool = False,
             limit: float = 1.5) -> str:
    """Forecast number {i} for a city.

    Args:
        city: Name of the city.
        days: How many days ahead.
        units: Measurement system.
        verbose: Include details.
        limit: Maximum precipitation in millimetres.
    """
    return city
'''


def write_module(directory: Path, count: int) -> Path:
    path = directory / "generated_tools.py"
    path.write_text("".join(TEMPLATE.format(i=i) for i in range(count)))
    return path


_loads = 0


def fresh_functions(path: Path, count: int) -> list[Callable[..., Any]]:
    """A new import of the generated module: new function objects every time."""
    global _loads
    _loads += 1
    name = f"generated_tools_{_loads}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return [getattr(module, f"tool_{i}") for i in range(count)]


def openai_dict(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": name, "description": description, "parameters": parameters}}


def lib_toolkeeper() -> tuple[Callable[..., Any], Callable[..., Any]]:
    from toolkeeper import Tool

    return Tool.from_function, lambda t: t.get_schema("openai-chat")


def lib_toolregistry() -> tuple[Callable[..., Any], Callable[..., Any]]:
    from toolregistry import Tool

    return Tool.from_function, lambda t: t.get_schema("openai-chat")


def lib_langchain() -> tuple[Callable[..., Any], Callable[..., Any]]:
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return (lambda f: StructuredTool.from_function(f, parse_docstring=True)), convert_to_openai_tool


def lib_pydantic_ai() -> tuple[Callable[..., Any], Callable[..., Any]]:
    from pydantic_ai import Tool

    def export(t: Any) -> dict[str, Any]:
        d = t.tool_def
        return openai_dict(d.name, d.description or "", d.parameters_json_schema)

    return Tool, export


def lib_openai_agents() -> tuple[Callable[..., Any], Callable[..., Any]]:
    from agents import function_tool
    from agents.models.chatcmpl_converter import Converter

    return function_tool, Converter.tool_to_openai


def lib_fastmcp() -> tuple[Callable[..., Any], Callable[..., Any]]:
    from fastmcp.tools import Tool

    return Tool.from_function, lambda t: openai_dict(t.name, t.description or "", t.parameters)


def lib_smolagents() -> tuple[Callable[..., Any], Callable[..., Any]]:
    from smolagents import tool
    from smolagents.models import get_tool_json_schema

    return tool, get_tool_json_schema


LIBRARIES: dict[str, Callable[[], tuple[Callable[..., Any], Callable[..., Any]]]] = {
    "toolkeeper": lib_toolkeeper,
    "toolregistry": lib_toolregistry,
    "langchain-core": lib_langchain,
    "pydantic-ai-slim": lib_pydantic_ai,
    "openai-agents": lib_openai_agents,
    "fastmcp": lib_fastmcp,
    "smolagents": lib_smolagents,
}


def measure(path: Path, count: int, rounds: int, make: Callable[..., Any],
            export: Callable[..., Any]) -> tuple[float, float, float]:
    create_times, export_times, repeat_times = [], [], []
    for _ in range(rounds):
        functions = fresh_functions(path, count)
        gc.collect()
        start = time.perf_counter()
        tools = [make(f) for f in functions]
        create_times.append(time.perf_counter() - start)
        gc.collect()
        start = time.perf_counter()
        for t in tools:
            export(t)
        export_times.append(time.perf_counter() - start)
        gc.collect()
        start = time.perf_counter()
        for t in tools:
            export(t)
        repeat_times.append(time.perf_counter() - start)
    return (statistics.median(create_times), statistics.median(export_times),
            statistics.median(repeat_times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = write_module(Path(tmp), args.count)
        for name, loader in LIBRARIES.items():
            try:
                make, export = loader()
            except ImportError as exc:
                print(f"skipping {name}: {exc}", file=sys.stderr)
                continue
            fresh_functions(path, 5)  # warm imports outside the measurement
            measure(path, min(args.count, 100), 1, make, export)  # warm-up round, not recorded
            rows[name] = measure(path, args.count, args.rounds, make, export)
    ours = rows["toolkeeper"]
    print(f"{args.count} tools, median of {args.rounds} rounds, Python {sys.version.split()[0]}\n")
    print("| library | create (s) | ÷ toolkeeper | first export (ms) | ÷ toolkeeper "
          "| repeat export (ms) | ÷ toolkeeper |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, row in sorted(rows.items(), key=lambda kv: kv[1][0]):
        cells = [f"{row[0]:.3f}", f"{row[0] / ours[0]:.1f}x", f"{row[1] * 1e3:.2f}",
                 f"{row[1] / ours[1]:.1f}x", f"{row[2] * 1e3:.2f}", f"{row[2] / ours[2]:.1f}x"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
