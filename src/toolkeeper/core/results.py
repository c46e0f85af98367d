"""What a tool returns: content blocks, ``ToolResult``, and coercion of plain return values."""

from __future__ import annotations

import base64
from typing import Annotated, Literal, Self, TypeVar

import pydantic_core
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

__all__ = [
    "AudioBlock",
    "ContentBlock",
    "FileBlock",
    "ImageBlock",
    "JsonBlock",
    "ResourceLinkBlock",
    "TextBlock",
    "ToolExecutionResult",
    "ToolResult",
    "to_tool_result",
]

_M = TypeVar("_M", bound=BaseModel)
_MEDIA = AliasChoices("media_type", "mimeType", "mime_type")


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class TextBlock(_Block):
    """Plain text for the model."""

    type: Literal["text"] = "text"
    text: str


class _BinaryBlock(_Block):
    data: str
    """Base64-encoded bytes."""
    media_type: str = Field(validation_alias=_MEDIA)

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str) -> Self:
        """Build the block from raw bytes."""
        return cls(data=base64.b64encode(data).decode("ascii"), media_type=media_type)

    def raw(self) -> bytes:
        """The decoded bytes."""
        return base64.b64decode(self.data)


class ImageBlock(_BinaryBlock):
    """An image (base64 data and its media type, e.g. ``image/png``)."""

    type: Literal["image"] = "image"


class AudioBlock(_BinaryBlock):
    """Audio (base64 data and its media type, e.g. ``audio/wav``)."""

    type: Literal["audio"] = "audio"


class FileBlock(_Block):
    """A file carried inline: text, or base64 ``data`` with a media type."""

    type: Literal["file"] = "file"
    name: str | None = None
    uri: str | None = None
    media_type: str = Field(default="application/octet-stream", validation_alias=_MEDIA)
    data: str | None = None
    text: str | None = None


class ResourceLinkBlock(_Block):
    """A link to a resource the client can fetch (MCP ``resource_link``)."""

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    description: str | None = None
    media_type: str | None = Field(default=None, validation_alias=_MEDIA)
    size: int | None = None


class JsonBlock(_Block):
    """A JSON value, rendered as JSON text for providers that only take text."""

    type: Literal["json"] = "json"
    data: object


ContentBlock = Annotated[
    TextBlock | ImageBlock | AudioBlock | FileBlock | ResourceLinkBlock | JsonBlock,
    Field(discriminator="type"),
]


class ToolResult(BaseModel):
    """The outcome of one tool execution.

    Attributes:
        content: Blocks shown to the model.
        is_error: The tool failed; ``content`` explains how.
        structured_content: A JSON object for programs (MCP ``structuredContent``).
        app_data: Data for the host application; never shown to the model.
        error_code: Stable code of the failure when ``is_error`` (see ``toolkeeper.errors``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: tuple[ContentBlock, ...] = ()
    is_error: bool = False
    structured_content: dict[str, object] | None = None
    app_data: object = Field(default=None, exclude=True)
    error_code: str | None = None

    @classmethod
    def text_result(cls, text: str, *, is_error: bool = False,
                    structured_content: dict[str, object] | None = None, app_data: object = None,
                    error_code: str | None = None) -> ToolResult:
        """A result holding one text block."""
        return cls(content=(TextBlock(text=text),), is_error=is_error,
                   structured_content=structured_content, app_data=app_data,
                   error_code=error_code)

    @classmethod
    def error(cls, message: str, *, code: str = "tool_raised") -> ToolResult:
        """An error result with one text block and a stable code."""
        return cls(content=(TextBlock(text=message),), is_error=True, error_code=code)

    @property
    def text(self) -> str:
        """The text of the result: text blocks, JSON blocks as JSON, others as short notes."""
        content = self.content
        if len(content) == 1:  # most results: no join
            return block_text(content[0])
        return "\n".join(block_text(block) for block in content)


ToolExecutionResult = ToolResult
"""``ToolResult`` under the name agent code written for other tool layers uses (the same
class); a second name, kept for good: a name of the public contract that programs written for it use."""


def block_text(block: ContentBlock) -> str:
    """A block as text: text and JSON as they are, media as a short note (``[image image/png]``)."""
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, JsonBlock):
        return dump_json(block.data)
    if isinstance(block, FileBlock) and block.text is not None:
        return block.text
    if isinstance(block, ResourceLinkBlock):
        return f"[resource {block.name}: {block.uri}]"
    media = block.media_type if isinstance(block, ImageBlock | AudioBlock | FileBlock) else ""
    return f"[{block.type} {media}]".replace(" ]", "]")


_DEFAULTS: dict[type[BaseModel], dict[str, object]] = {}


def _build(cls: type[_M], **values: object) -> _M:
    """A model from trusted values: ``model_construct`` without its per-call default lookups."""
    defaults = _DEFAULTS.get(cls)
    if defaults is None:
        defaults = _DEFAULTS[cls] = {name: f.get_default(call_default_factory=False)
                                     for name, f in cls.model_fields.items()}
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", {**defaults, **values})
    object.__setattr__(obj, "__pydantic_fields_set__", set(values))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def dump_json(value: object) -> str:
    """Compact JSON text of any JSON-able value (dates, models, dataclasses included)."""
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is bool:
        return "true" if value else "false"
    return pydantic_core.to_json(value, fallback=str).decode("utf-8")


_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
)


def sniff_media_type(data: bytes) -> str:
    """Guess the media type of bytes from their magic number."""
    for magic, media in _SIGNATURES:
        if data.startswith(magic):
            return media
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    return "application/octet-stream"


def _bytes_block(data: bytes) -> ImageBlock | AudioBlock | FileBlock:
    media = sniff_media_type(data)
    if media.startswith("image/"):
        return ImageBlock.from_bytes(data, media)
    if media.startswith("audio/"):
        return AudioBlock.from_bytes(data, media)
    return FileBlock(media_type=media, data=base64.b64encode(data).decode("ascii"))


_BLOCK_TYPES = (TextBlock, ImageBlock, AudioBlock, FileBlock, ResourceLinkBlock, JsonBlock)


def to_tool_result(value: object, *, wrap_structured: bool = False) -> ToolResult:
    """Coerce a tool's return value into a ``ToolResult``.

    ``str`` becomes a text block; ``dict``, pydantic models and dataclasses become JSON text plus
    ``structured_content``; numbers, lists and other JSON values become JSON text (and, with
    ``wrap_structured``, ``structured_content={"result": value}``); ``bytes`` become an image,
    audio or file block by their magic number; ``None`` becomes an empty result; content blocks
    and ``ToolResult`` pass through.
    """
    if isinstance(value, ToolResult):
        return value
    kind = type(value)
    if kind is str:  # the hot paths build trusted models without re-validating
        # A declared output schema (``-> str`` wraps as {"result": ...}) promises structured
        # content: MCP clients reject a result that has the schema but not the content.
        structured = {"result": value} if wrap_structured else None
        return _build(ToolResult, content=(_build(TextBlock, text=value),),
                      structured_content=structured)
    if kind is int or kind is float or kind is bool:
        text = _build(TextBlock, text=dump_json(value))
        structured = {"result": value} if wrap_structured else None
        return _build(ToolResult, content=(text,), structured_content=structured)
    if value is None:
        return _build(ToolResult)
    if isinstance(value, str):
        plain_text = str(value)
        return _build(ToolResult, content=(_build(TextBlock, text=plain_text),),
                      structured_content={"result": plain_text} if wrap_structured else None)
    if isinstance(value, bytes | bytearray | memoryview):
        return ToolResult(content=(_bytes_block(bytes(value)),))
    if isinstance(value, _BLOCK_TYPES):
        return ToolResult(content=(value,))
    if isinstance(value, list | tuple) and value and all(isinstance(v, _BLOCK_TYPES) for v in value):
        return ToolResult(content=tuple(value))
    plain = _to_plain(value)
    text = _build(TextBlock, text=dump_json(plain))
    if isinstance(plain, dict):
        return _build(ToolResult, content=(text,), structured_content=plain)
    structured = {"result": plain} if wrap_structured else None
    return _build(ToolResult, content=(text,), structured_content=structured)


def _to_plain(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if type(value) in (int, float, bool):
        return value
    return pydantic_core.to_jsonable_python(value, fallback=str)
