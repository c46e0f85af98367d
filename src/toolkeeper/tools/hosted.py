"""Tools the provider runs (``HostedTool``) or declares (``ProviderDefinedTool``), and the
plain declarations of a function (``FunctionSpec``) and of a provider's tool (``ProviderSpec``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from ..core.json import JsonObject, JsonValue
from ..core.metadata import DEFAULT_METADATA, ToolMetadata
from ..core.results import ToolResult
from ..core.risk import HitlMode, ToolRisk, default_hitl_mode
from ..core.spec import HandlesCalls, ToolKind, ToolLike
from ..errors import WireFormatError

if TYPE_CHECKING:
    from ..core.call import ToolCall
    from ..core.context import ToolContext

__all__ = [
    "FunctionSpec",
    "HostedTool",
    "ProviderDefinedTool",
    "ProviderSpec",
    "is_hosted_tool",
    "is_provider_defined_tool",
]

_FAMILY = {
    "openai-chat": "openai", "openai-responses": "openai", "anthropic": "anthropic",
    "gemini": "google", "mcp": "mcp",
}


@dataclass(frozen=True, kw_only=True)
class FunctionSpec:
    """A local function's declaration: name, description, parameters."""

    name: str
    description: str = ""
    parameters: JsonObject = field(default_factory=dict)
    lazy_schema: bool = False


@dataclass(frozen=True, kw_only=True)
class ProviderSpec:
    """A provider's own declaration of a tool, sent as-is.

    ``provider`` is an API format (``openai-responses``) or a provider family (``openai``,
    ``anthropic``, ``google``); ``spec`` is the exact dict that provider expects.
    """

    name: str
    provider: str
    spec: JsonObject


class _ProviderTool:
    runs_scripts: ClassVar[bool] = False
    hitl_explicit: ClassVar[bool] = True
    """A provider's tool asks by its HITL mode whichever way it was set (the stricter reading,
    as before this was declared)."""

    def __init__(
        self,
        *,
        name: str,
        description: str = "",
        provider_specs: Mapping[str, ProviderSpec | Mapping[str, JsonValue]],
        risk: ToolRisk | str = ToolRisk.SAFE,
        hitl_mode: HitlMode | str | None = None,
        metadata: ToolMetadata | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.provider_specs: dict[str, ProviderSpec] = {
            key: spec if isinstance(spec, ProviderSpec)
            else ProviderSpec(name=name, provider=key, spec=dict(spec))
            for key, spec in provider_specs.items()
        }
        self.risk = ToolRisk(risk)
        self.hitl_mode = HitlMode(hitl_mode) if hitl_mode is not None else default_hitl_mode(self.risk)
        self.metadata = metadata or DEFAULT_METADATA
        self.namespace: str | None = None

    @property
    def qualified_name(self) -> str:
        return self.name

    def spec_for(self, api_format: str) -> ProviderSpec | None:
        """The declaration for an API format, falling back to its provider family."""
        return self.provider_specs.get(api_format) or self.provider_specs.get(
            _FAMILY.get(api_format, "")
        )

    def get_schema(self, api_format: str = "openai-responses", **_: object) -> JsonObject:
        """The provider's declaration for ``api_format``, exactly as given."""
        spec = self.spec_for(api_format)
        if spec is None:
            known = ", ".join(sorted(self.provider_specs)) or "none"
            raise WireFormatError(
                f"{type(self).__name__} '{self.name}' has no declaration for '{api_format}' "
                f"(it has: {known}); add a ProviderSpec for it or leave the tool out"
            )
        return dict(spec.spec)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class HostedTool(_ProviderTool):
    """A tool the provider both declares and runs (e.g. OpenAI ``web_search``).

    It is never run locally; its result arrives in the provider's next response.
    """

    kind: ClassVar[ToolKind] = "hosted"


class ProviderDefinedTool(_ProviderTool):
    """A tool the provider declares but the application runs (e.g. computer use, apply_patch).

    Subclass and implement ``handle_call``; ``call_types`` names the provider output items it
    handles (``computer_call``...).
    """

    kind: ClassVar[ToolKind] = "provider"
    call_types: tuple[str, ...] = ()

    async def handle_call(self, call: ToolCall, ctx: ToolContext | None) -> ToolResult:
        """Run the provider's call locally and return its result."""
        raise NotImplementedError(f"{type(self).__name__} must implement handle_call")


def is_provider_defined_tool(tool: object) -> bool:
    """True for tools the provider declares and the application runs (their ``kind`` is
    ``provider`` and they handle calls). Check this first."""
    # the kind first: a protocol isinstance costs tens of microseconds, and search asks this
    # of every hit
    return isinstance(tool, ProviderDefinedTool) or (
        getattr(tool, "kind", None) == "provider" and isinstance(tool, HandlesCalls))


def is_hosted_tool(tool: object) -> bool:
    """True for tools the provider declares and runs (their ``kind`` is ``hosted``)."""
    return isinstance(tool, HostedTool) or (
        getattr(tool, "kind", None) == "hosted" and isinstance(tool, ToolLike))
