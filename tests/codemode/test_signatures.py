"""The signatures a model writing a code-mode script reads: each parameter's type, its default and
the fields of a nested object, as the tool's own schema says."""

from __future__ import annotations

import ast
import importlib.util
import sys
from enum import StrEnum
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from toolkeeper import Tool, tool
from toolkeeper.codemode.signatures import signature

from ..formats.tools_zoo import zoo


class Units(StrEnum):
    METRIC = "metric"
    IMPERIAL = "imperial"


@tool
def get_forecast(city: str, days: int = 1, units: Units = Units.METRIC) -> str:
    """Get the weather forecast for a city.

    Args:
        city: City name, e.g. "Lisbon".
        days: How many days ahead (1 = tomorrow).
        units: Measurement system of the temperatures.
    """
    return city


class Alert(BaseModel):
    region: str = Field(description="Region code such as 'PT-11'.")
    level: Literal["yellow", "orange", "red"]
    message: str = Field(max_length=280)
    repeat: int = 1


@tool
def broadcast_alert(alert: Alert, channels: list[str] | None = None) -> str:
    """Broadcast a weather alert to subscribers."""
    return alert.region


def test_parameters_keep_their_types_and_defaults() -> None:
    head = signature(get_forecast).splitlines()[0]
    assert head == ("def get_forecast(city: str, days: int = 1, "
                    "units: Literal['metric', 'imperial'] = 'metric') -> Result:")
    assert "days: How many days ahead (1 = tomorrow)." in signature(get_forecast)


def test_a_nested_object_shows_its_fields() -> None:
    text = signature(broadcast_alert)
    assert text.startswith("class Alert(TypedDict):\n"
                           "    region: str  # Region code such as 'PT-11'.\n"
                           "    level: Literal['yellow', 'orange', 'red']\n"
                           "    message: str\n"
                           "    repeat: NotRequired[int]  # (default 1)\n")
    assert ("def broadcast_alert(alert: Alert, channels: list[str] | None = None) -> Result:"
            in text)


def test_a_raw_schema_with_inline_objects_and_no_defaults() -> None:
    raw = Tool(name="book", description="Book a room.", callable=lambda **kw: kw, parameters={
        "type": "object", "required": ["guest"],
        "properties": {
            "guest": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "nights": {"type": "integer", "default": 2}}},
            "notes": {"type": "string"},
            "extras": {"type": "object", "additionalProperties": {"type": "boolean"}}}})
    text = signature(raw)
    assert "class Guest(TypedDict):\n    name: str\n    nights: NotRequired[int]" in text
    assert ("def book(guest: Guest, notes: str = None, extras: dict[str, bool] = None) -> Result:"
            in text)


@pytest.mark.parametrize("example", zoo(), ids=lambda t: t.name)
def test_every_signature_is_python(example: Tool) -> None:
    ast.parse(signature(example))  # recursive models, enums, maps: still valid source


def test_the_code_mode_page_shows_what_the_example_tools_give(
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("weather_example", root / "examples/weather.py")
    assert spec is not None and spec.loader is not None
    weather = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "weather_example", weather)  # its annotations resolve there
    spec.loader.exec_module(weather)
    page = (root / "docs/codemode.md").read_text(encoding="utf-8")
    assert f"```\n{signature(weather.broadcast_alert)}\n```" in page
