"""Functions become tools: schema from type hints and docstrings, once, with clear errors."""

from __future__ import annotations

import dataclasses
import inspect
import socket
import typing
from enum import Enum
from typing import Annotated, Any, Literal, Optional, cast

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from toolkeeper import SchemaError, Tool, ToolContext, tool


class Color(Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    street: str
    zip_code: str = Field(pattern=r"^\d{5}$")


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Options(TypedDict):
    verbose: bool
    depth: int


def test_hints_defaults_and_google_docstring_give_the_schema() -> None:
    def search(query: str, limit: int = 10, exact: bool = False) -> list[str]:
        """Search the index.

        Longer explanation of the search.

        Args:
            query: What to look for.
            limit: At most this many hits.
            exact: Match the whole phrase.
        """
        return []

    t = Tool.from_function(search)
    assert t.name == "search"
    assert t.description == "Search the index.\n\nLonger explanation of the search."
    assert t.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "default": 10, "description": "At most this many hits."},
            "exact": {"type": "boolean", "default": False, "description": "Match the whole phrase."},
        },
        "required": ["query"],
    }


def test_numpy_docstring_gives_parameter_descriptions() -> None:
    def area(width: float, height: float) -> float:
        """Area of a rectangle.

        Parameters
        ----------
        width : float
            The width in metres.
        height : float
            The height in metres.
        """
        return width * height

    props = Tool.from_function(area).parameters["properties"]
    assert props["width"]["description"] == "The width in metres."
    assert props["height"]["description"] == "The height in metres."


def test_sphinx_docstring_gives_parameter_descriptions() -> None:
    def greet(name: str) -> str:
        """Greet someone.

        :param name: Who to greet.
        :returns: The greeting.
        """
        return f"hi {name}"

    t = Tool.from_function(greet)
    assert t.description == "Greet someone."
    assert t.parameters["properties"]["name"]["description"] == "Who to greet."


def test_optional_literal_and_enum_parameters() -> None:
    def paint(color: Color, mode: Literal["fast", "slow"] = "fast",
              note: Optional[str] = None) -> str:  # noqa: UP045 - Optional on purpose
        """Paint."""
        return "ok"

    props = Tool.from_function(paint).parameters["properties"]
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string", "default": "fast"}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    enum_schema = props["color"]
    ref = enum_schema["$ref"].rsplit("/", 1)[-1]
    assert Tool.from_function(paint).parameters["$defs"][ref]["enum"] == ["red", "green"]


def test_nested_models_dataclasses_and_typeddicts() -> None:
    def ship(to: Address, at: Point, options: Options) -> str:
        """Ship a parcel."""
        return "ok"

    t = Tool.from_function(ship)
    defs = t.parameters["$defs"]
    assert {"Address", "Point", "Options"} <= set(defs)
    assert defs["Address"]["properties"]["zip_code"]["pattern"] == r"^\d{5}$"
    kwargs = t.validate_arguments(
        {"to": {"street": "Main", "zip_code": "12345"}, "at": {"x": 1, "y": "2"},
         "options": {"verbose": True, "depth": 2}}
    )
    assert isinstance(kwargs["to"], Address)
    assert kwargs["at"] == Point(x=1.0, y=2.0)
    assert kwargs["options"] == {"verbose": True, "depth": 2}


class Plain(typing.TypedDict):
    a: int


def test_typing_typeddict_on_old_python_names_the_fix() -> None:
    def f(p: Plain) -> None:
        return None

    with pytest.raises(SchemaError, match=r"parameter 'p'.*typing_extensions"):
        Tool.from_function(f)


def test_annotated_field_description_is_used() -> None:
    def f(n: Annotated[int, Field(description="How many.", ge=1)]) -> int:
        return n

    prop = Tool.from_function(f).parameters["properties"]["n"]
    assert prop == {"type": "integer", "description": "How many.", "minimum": 1}


def test_ctx_parameter_is_injected_and_left_out_of_the_schema() -> None:
    seen: list[ToolContext] = []

    def lookup(key: str, ctx: ToolContext) -> str:
        seen.append(ctx)
        return key.upper()

    t = Tool.from_function(lookup)
    assert set(t.parameters["properties"]) == {"key"}
    assert t.run_raw({"key": "a"}) == "A"
    assert isinstance(seen[0], ToolContext)
    assert seen[0].tool_name == "lookup"


def test_async_functions_are_detected_and_run() -> None:
    async def fetch(url: str) -> dict[str, str]:
        return {"url": url}

    t = Tool.from_function(fetch)
    assert t.is_async and t.metadata.is_async
    assert t.run_raw({"url": "x"}) == {"url": "x"}


def test_unnamed_lambda_needs_a_name() -> None:
    with pytest.raises(SchemaError, match="lambda"):
        Tool.from_function(lambda a, b: a * b)
    assert Tool.from_function(lambda a, b: a * b, name="mul").run_raw({"a": 2, "b": 3}) == 6


def test_star_args_are_a_schema_error_naming_function_and_parameter() -> None:
    def bad(*items: int) -> int:
        return sum(items)

    with pytest.raises(SchemaError, match=r"function 'bad'.*'\*items'"):
        Tool.from_function(bad)

    def worse(**options: Any) -> None:
        return None

    with pytest.raises(SchemaError, match=r"'\*\*options'"):
        Tool.from_function(worse)


def test_unexpressible_parameter_type_is_a_schema_error_naming_it() -> None:
    def connect(host: str, sock: socket.socket) -> None:
        return None

    with pytest.raises(SchemaError, match=r"function 'connect': parameter 'sock'"):
        Tool.from_function(connect)


def test_unresolvable_forward_reference_is_a_schema_error() -> None:
    def f(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(SchemaError, match="cannot be resolved"):
        Tool.from_function(f)


def test_methods_become_tools_without_self() -> None:
    class Calculator:
        def __init__(self, base: int) -> None:
            self.base = base

        def add(self, n: int) -> int:
            """Add n to the base."""
            return self.base + n

    t = Tool.from_function(Calculator(10).add)
    assert list(t.parameters["properties"]) == ["n"]
    assert t.run_raw({"n": 5}) == 15


def test_positional_only_parameters_are_passed_positionally() -> None:
    def power(base: int, /, exp: int = 2) -> int:
        return int(base**exp)

    assert Tool.from_function(power).run_raw({"base": 3}) == 9


def test_decorator_bare_and_with_options_keeps_the_function_callable() -> None:
    @tool
    def double(x: int) -> int:
        """Double x."""
        return x * 2

    @tool(name="triple_it", tags={"math"}, category="data", timeout=5)
    def triple(x: int) -> int:
        return x * 3

    assert isinstance(double, Tool) and double(4) == 8
    assert triple.name == "triple_it"
    assert triple.metadata.tags == frozenset({"math"})
    assert triple.metadata.timeout == 5
    assert triple.run({"x": 2}) == 6


def test_a_function_is_inspected_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    original = inspect.signature  # what toolkeeper.tools.signature calls

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(inspect, "signature", counting)

    def f(a: int) -> int:
        return a

    t = Tool.from_function(f)
    for _ in range(3):
        t.run_raw({"a": 1})
        t.get_schema("openai-chat")
        t.get_schema("anthropic")
    assert calls["n"] == 1


@pytest.mark.parametrize("returns", [int, float, str, bool, list, dict, list[int], dict[str, float],
                                     int | None, list[str] | None, Literal["a", "b"]])
def test_the_output_schema_of_a_common_return_type_is_pydantics(returns: Any) -> None:
    from pydantic import TypeAdapter

    from toolkeeper.tools.signature import strip_titles

    def f() -> None: ...
    f.__annotations__["return"] = returns
    schema = Tool.from_function(f, name="f").spec.output_schema
    expected = strip_titles(TypeAdapter(returns).json_schema(mode="serialization"))
    assert schema is not None
    if schema.get("x-toolkeeper-wrap-result"):
        assert cast(Any, schema)["properties"]["result"] == expected
    else:
        assert schema == expected
