"""Return values become ToolResults; a declared return type is checked."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from toolkeeper import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    TextBlock,
    Tool,
    ToolResult,
)
from toolkeeper.core.results import to_tool_result

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
WAV = b"RIFF\x00\x00\x00\x00WAVEfmt "


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Pair:
    left: str
    right: str


@pytest.mark.parametrize(
    ("value", "text", "structured"),
    [
        ("hello", "hello", None),
        (42, "42", None),
        ({"a": 1}, '{"a":1}', {"a": 1}),
        ([1, 2], "[1,2]", None),
        (Point(x=1, y=2), '{"x":1,"y":2}', {"x": 1, "y": 2}),
        (Pair("l", "r"), '{"left":"l","right":"r"}', {"left": "l", "right": "r"}),
        (None, "", None),
    ],
)
def test_plain_values_are_coerced(value: Any, text: str, structured: Any) -> None:
    result = to_tool_result(value)
    assert result.text == text
    assert result.structured_content == structured
    assert not result.is_error


def test_bytes_become_media_blocks_by_magic_number() -> None:
    image = to_tool_result(PNG).content[0]
    assert isinstance(image, ImageBlock) and image.media_type == "image/png"
    assert image.raw() == PNG
    audio = to_tool_result(WAV).content[0]
    assert isinstance(audio, AudioBlock) and audio.media_type == "audio/wav"
    other = to_tool_result(b"\x00\x01").content[0]
    assert isinstance(other, FileBlock) and other.media_type == "application/octet-stream"
    assert base64.b64decode(other.data or "") == b"\x00\x01"


def test_blocks_and_results_pass_through() -> None:
    block = TextBlock(text="x")
    assert to_tool_result(block).content == (block,)
    ready = ToolResult(content=[{"type": "text", "text": "y"}], app_data={"k": 1})
    assert to_tool_result(ready) is ready
    assert ready.content[0] == TextBlock(text="y")


def test_app_data_is_never_serialized_for_the_model() -> None:
    result = ToolResult.text_result("done", app_data={"secret": "s3"})
    assert "app_data" not in result.model_dump()
    assert result.app_data == {"secret": "s3"}


def test_return_annotation_gives_an_output_schema_and_wraps_scalars() -> None:
    def area(w: float, h: float) -> float:
        return w * h

    def point() -> Point:
        return Point(x=1, y=2)

    assert Tool.from_function(area).output_schema == {
        "type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"],
        "x-toolkeeper-wrap-result": True,
    }
    point_schema: Any = Tool.from_function(point).output_schema
    assert point_schema["properties"]["x"] == {"type": "integer"}
    result = Tool.from_function(area).to_result(6.0)
    assert result.structured_content == {"result": 6.0}


def test_structured_result_not_matching_the_return_type_is_an_error_result() -> None:
    def count() -> dict[str, int]:
        return {"apples": "many"}  # type: ignore[dict-item]

    t = Tool.from_function(count)
    result = t.to_result(t.run_raw({}))
    assert result.is_error
    assert result.error_code == "invalid_output"
    assert "count" in result.text and "return type" in result.text


async def test_execute_returns_a_tool_result() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    result = await Tool.from_function(add).execute(None, a=1, b=2)
    assert result.structured_content == {"result": 3}
    assert result.text == "3"
