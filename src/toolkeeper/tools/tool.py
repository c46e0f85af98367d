"""``Tool``: a frozen tool definition plus the callable that implements it."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Unpack, overload

from pydantic import BaseModel

from ..core.context import ToolContext
from ..core.json import JsonObject
from ..core.metadata import ToolMetadata
from ..core.results import ToolResult, to_tool_result
from ..core.risk import HitlMode, ToolRisk
from ..core.spec import ToolKind, ToolSpec
from ..errors import InvalidOutputError, UsageError
from ..formats.problems import Problem
from ..formats.registry import check as check_export
from ..formats.registry import declare
from .definition import (
    FIELDS,
    Defaults,
    Defined,
    ToolChanges,
    ToolDefinition,
    ToolOptions,
    define,
    define_function,
    derive,
    shown,
)
from .naming import NameSeparator, normalize_tool_name, qualify, split_qualified
from .runner import Binding, call_async, call_sync
from .signature import inspect_function
from .validation import (
    ArgumentValidator,
    FunctionArgumentValidator,
    ModelArgumentValidator,
    SchemaArgumentValidator,
)

__all__ = ["Tool"]

class Tool:
    """One tool: a name, a description, a JSON Schema of its parameters and the callable.

    Build one from a function (``Tool.from_function`` or ``@tool``), from a raw JSON Schema and a
    callable (``Tool(name=..., description=..., parameters=..., callable=...)``), from a
    ``ToolDefinition`` (``Tool(definition)``), or by subclassing ``BaseTool``. A tool is frozen
    once built: its fields are its ``definition``'s, and ``replace`` or ``with_namespace``
    derive changed copies.

    Attributes:
        name: Name the model calls the tool by (``namespace-method_name`` when namespaced).
        description: What the tool does, for the model.
        parameters: JSON Schema (an object schema) of the arguments.
        callable: The function that runs the tool.
        metadata: Behavioural and classification metadata.
        namespace: Group the tool belongs to, if any.
        method_name: The name before the namespace was added.
        risk: Position on the risk ladder.
        hitl_mode: How a human is asked before the tool runs.
        hitl_explicit: Whether the HITL mode was chosen (argument, class attribute or
            ``replace``) rather than inherited from the risk.
        schema_warnings: Problems left in a raw schema that could not be repaired.
    """

    if TYPE_CHECKING:
        name: str
        description: str
        # A JSON Schema typed as pydantic and the MCP SDK type one (``definition.parameters``
        # is the same dict typed as JSON).
        parameters: dict[str, Any]
        callable: Callable[..., object] | None
        metadata: ToolMetadata
        namespace: str | None
        method_name: str | None
        # Class-level defaults a BaseTool subclass overrides; a hitl_mode of None means "the
        # default for the risk", and every tool holds a resolved HitlMode.
        risk: ToolRisk = ToolRisk.SAFE
        hitl_mode: HitlMode
        hitl_explicit: bool
        schema_warnings: tuple[str, ...]
    else:
        name = shown("name")
        description = shown("description")
        parameters = shown("parameters")
        callable = shown("callable")
        metadata = shown("metadata")
        namespace = shown("namespace")
        method_name = shown("method_name")
        risk = Defined("risk", ToolRisk.SAFE)  # the two a subclass's body may set
        hitl_mode = Defined("hitl_mode", None)
        hitl_explicit = shown("hitl_explicit")
        schema_warnings = shown("schema_warnings")

    @property
    def preflight(self) -> Callable[..., object] | None:
        """The tool's pre-flight check, if it declares one: called with a call's validated
        arguments (as keywords) before a person is asked, it raises what the tool's own run
        would raise for them (sync or async). A ``BaseTool`` subclass may define it as a
        method instead."""
        return self._definition.preflight

    kind: ClassVar[ToolKind] = "function"
    runs_scripts: ClassVar[bool] = False
    """Whether the tool runs code-mode scripts (``tool_chain``): a script may not call it."""
    _definition: ToolDefinition
    _spec: ToolSpec | None
    _validator: ArgumentValidator | None

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A definition field a subclass sets in its body (``risk = ToolRisk.HIGH``) becomes
        that class's default, read through the tool's definition like every field."""
        super().__init_subclass__(**kwargs)
        for field in FIELDS:
            declared = cls.__dict__.get(field)
            if declared is not None and not isinstance(declared, Defined | property):
                setattr(cls, field, Defined(field, declared))

    @overload
    def __init__(self, definition: ToolDefinition, /) -> None: ...
    @overload
    def __init__(self, /, *, name: str, **options: Unpack[ToolOptions]) -> None: ...

    def __init__(self, definition: ToolDefinition | None = None, /, *, name: str | None = None,
                 **options: Unpack[ToolOptions]) -> None:
        if definition is None:
            definition = define(name, self.defaults(), **options)
        elif name is not None or options:
            raise UsageError("Tool(definition) takes the definition alone: derive a changed "
                             "one with toolkeeper.tools.definition.derive")
        self._bind(definition)
        if definition.function is None and definition.parameters_model is None \
                and definition.callable is not None:
            # Compile a raw schema now: a schema the validator cannot read is a definition error.
            self._validator = self._build_validator()

    @classmethod
    def defaults(cls) -> Defaults:
        """The risk and HITL mode this class gives the tools it makes (its class attributes)."""
        return Defaults(risk=ToolRisk(cls.risk), hitl_mode=cls.hitl_mode)

    @property
    def definition(self) -> ToolDefinition:
        """Everything this tool is, as one frozen value."""
        return self._definition

    def _bind(self, definition: ToolDefinition) -> None:
        """Take ``definition`` as this tool's; what was worked out from the old one is dropped."""
        self._definition = definition
        self._spec = None
        self._validator = None

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_function(
        cls,
        func: Callable[..., object],
        name: str | None = None,
        description: str | None = None,
        namespace: str | None = None,
        method_name: str | None = None,
        metadata: ToolMetadata | None = None,
        *,
        risk: ToolRisk | str | None = None,
        hitl_mode: HitlMode | str | None = None,
        preflight: Callable[..., object] | None = None,
    ) -> Tool:
        """Build a tool from a function or method, inspecting it once.

        Type hints give the JSON Schema (through pydantic), the docstring gives the description
        and per-parameter descriptions (Google, NumPy or Sphinx style), defaults make parameters
        optional, and a ``ctx`` parameter receives a ``ToolContext`` and stays out of the schema.

        Raises:
            SchemaError: for an unnamed lambda without ``name``, ``*args``/``**kwargs``, or a
                parameter type that cannot be expressed as JSON Schema.
        """
        info = inspect_function(func, name=name, description=description)
        return cls(define_function(info, func, cls.defaults(), namespace=namespace,
                                   method_name=method_name, metadata=metadata, risk=risk,
                                   hitl_mode=hitl_mode, preflight=preflight))

    def replace(self, **changes: Unpack[ToolChanges]) -> Tool:
        """A copy of this tool with some definition fields changed."""
        clone = copy.copy(self)
        validator = self._validator
        clone._bind(derive(self._definition, **changes))
        if "parameters" not in changes:
            clone._validator = validator
        return clone

    def with_descriptions(
        self, description: str | None = None, parameters: dict[str, str] | None = None
    ) -> Tool:
        """A copy with another description and parameter descriptions (e.g. localized).

        Validation is unchanged: descriptions are shown to the model, never checked.
        """
        clone = self.replace(description=description) if description else self.replace()
        if parameters:
            found = self.parameters.get("properties")
            props: JsonObject = dict(found) if isinstance(found, dict) else {}
            for name, text in parameters.items():
                prop = props.get(name)
                if isinstance(prop, dict):
                    props[name] = {**prop, "description": text}
            shown: JsonObject = {**self.parameters, "properties": props}
            validator = clone._validator
            # only what the model is shown changes: the validation stays the signature's
            clone._bind(dataclasses.replace(clone._definition, parameters=shown))
            clone._validator = validator
        return clone

    # -- names --------------------------------------------------------------------------

    @property
    def qualified_name(self) -> str:
        """``{namespace}-{method_name}`` when both are set, else ``name``."""
        if self.namespace and self.method_name:
            return qualify(self.namespace, self.method_name)
        return self.name

    def update_namespace(
        self, namespace: str | None, force: bool = False, sep: NameSeparator = "-"
    ) -> Tool:
        """Put the tool into a namespace, in place, and return it (as the registry library does).

        A name that already carries a namespace (a ``namespace`` field, or ``-``/``.`` in the
        name) keeps it unless ``force``; the separator is rewritten to ``sep`` either way. This is
        the one in-place change a frozen tool allows — do it before the tool is registered, or
        use ``with_namespace`` for a copy.
        """
        if not namespace:
            return self
        new_ns, method = self._namespace_parts(normalize_tool_name(namespace), force)
        validator = self._validator
        self._bind(derive(self._definition, name=qualify(new_ns, method, sep),
                          namespace=new_ns, method_name=method))
        self._validator = validator
        return self

    def with_namespace(
        self, namespace: str | None, *, force: bool = False, sep: NameSeparator = "-"
    ) -> Tool:
        """Like ``update_namespace`` but returns a changed copy and leaves this tool alone."""
        return self.replace().update_namespace(namespace, force=force, sep=sep)

    def _namespace_parts(self, namespace: str, force: bool) -> tuple[str, str]:
        existing: str | None
        if self.namespace:
            existing, method = self.namespace, self.method_name or self.name
        else:
            existing, method = split_qualified(self.name)
        if existing and not force:
            return existing, method
        return namespace, method

    # -- metadata views -----------------------------------------------------------------

    @property
    def parameters_model(self) -> type[BaseModel] | None:
        """The pydantic model of the parameters: the one given, or for a tool made from a
        function the one generated from its signature (built on first access); ``None`` for a
        raw JSON Schema."""
        given = self._definition.parameters_model
        if given is not None:
            return given
        info = self._definition.function
        return info.parameters_model if info is not None else None

    @property
    def is_async(self) -> bool:
        """Whether the callable is a coroutine function (``metadata.is_async``)."""
        return self.metadata.is_async

    @property
    def input_schema(self) -> JsonObject:
        """``parameters`` under the name the ``Tool`` protocol and ``BaseTool`` use; a
        second name, kept for good: a name of the public contract that programs written for it use."""
        return self.parameters

    @property
    def output_schema(self) -> JsonObject | None:
        """JSON Schema of the structured result, from the return annotation or given explicitly."""
        given = self._definition.output_schema
        if given is not None:
            return given
        info = self._definition.function
        return info.output_schema if info is not None else None

    # -- validation and calls ------------------------------------------------------------

    def validate_arguments(self, arguments: Mapping[str, object]) -> dict[str, object]:
        """Validate and coerce a model's arguments into the callable's keyword arguments.

        Raises:
            InvalidArgumentsError: naming each bad field path, what was expected and received.
        """
        validator = self._validator
        if validator is None:
            validator = self._validator = self._build_validator()
        return validator(arguments)

    def _build_validator(self) -> ArgumentValidator:
        definition = self._definition
        unknown = definition.metadata.unknown_arguments
        if definition.parameters_model is not None:
            return ModelArgumentValidator(definition.parameters_model)
        if definition.function is not None:
            return FunctionArgumentValidator(definition.name, definition.function, unknown)
        return SchemaArgumentValidator(definition.name, definition.parameters, unknown)

    def _require_callable(self) -> Callable[..., object]:
        func = self._definition.callable
        if func is None:
            raise UsageError(f"tool '{self.name}' has no callable to run")
        return func

    def _ctx_param(self) -> str | None:
        info = self._definition.function
        return info.ctx_param if info is not None else None

    def _positional(self) -> tuple[str, ...]:
        info = self._definition.function
        return info.positional if info is not None else ()

    def call_sync(self, kwargs: dict[str, object], ctx: ToolContext | None = None) -> object:
        """Call the callable with validated arguments from synchronous code; returns its value."""
        return call_sync(self._require_callable(), kwargs, self._binding(ctx))

    async def call_async(self, kwargs: dict[str, object], ctx: ToolContext | None = None
                         ) -> object:
        """Call the callable with validated arguments; sync callables run in a worker thread."""
        metadata = self.metadata
        func = self._require_callable()
        info = self._definition.function
        if metadata.is_async and info is not None and not info.positional and \
                info.ctx_param is None:  # the common case: an async function of keywords
            value = func(**kwargs)
            return await value if inspect.isawaitable(value) else value
        return await call_async(func, kwargs, self._binding(ctx),
                                in_thread=not metadata.is_async and not metadata.inline)

    def _binding(self, ctx: ToolContext | None) -> Binding:
        ctx_param = self._ctx_param()
        if ctx_param is not None and ctx is None:
            ctx = ToolContext(tool_name=self.name)
        return self._positional(), ctx_param, ctx

    def to_result(self, value: object) -> ToolResult:
        """Coerce a return value into a ``ToolResult``, checking it against the output type."""
        info = self._definition.function
        if info is not None and not isinstance(value, ToolResult):
            problem = info.output_problem(value)
            if problem is not None:
                error = InvalidOutputError(
                    f"tool '{self.name}' returned a value that does not match its declared "
                    f"return type: {problem}",
                    tool_name=self.name,
                )
                return ToolResult.error(error.message, code=error.code)
            return to_tool_result(value, wrap_structured=info.wraps_output)
        return to_tool_result(value)

    async def execute(self, ctx: ToolContext | None = None, /, **kwargs: object) -> ToolResult:
        """The ``Tool`` protocol's call: run with already-validated arguments and return a
        ``ToolResult``."""
        return self.to_result(await self.call_async(kwargs, ctx))

    def run_raw(self, parameters: Mapping[str, object]) -> object:
        """Validate and run synchronously, returning the raw value; exceptions propagate."""
        return self.call_sync(self.validate_arguments(parameters))

    async def arun_raw(self, parameters: Mapping[str, object]) -> object:
        """Validate and run asynchronously, returning the raw value; exceptions propagate."""
        return await self.call_async(self.validate_arguments(parameters))

    def run(self, parameters: Mapping[str, object]) -> object:
        """Like ``run_raw`` but a failure returns ``"Error executing <name>: <reason>"``.

        .. deprecated:: swallowing the exception emits a ``DeprecationWarning``; from 0.3.0
           ``run`` raises as ``run_raw`` does (use ``run_raw`` to get the exception now).
        """
        try:
            return self.run_raw(parameters)
        except Exception as exc:
            return self._swallowed(exc, "run_raw")

    async def arun(self, parameters: Mapping[str, object]) -> object:
        """Like ``arun_raw`` but a failure returns ``"Error executing <name>: <reason>"``.

        .. deprecated:: swallowing the exception emits a ``DeprecationWarning``; from 0.3.0
           ``arun`` raises as ``arun_raw`` does (use ``arun_raw`` to get the exception now).
        """
        try:
            return await self.arun_raw(parameters)
        except Exception as exc:
            return self._swallowed(exc, "arun_raw")

    def _swallowed(self, exc: Exception, instead: str) -> str:
        warnings.warn(f"{instead.removesuffix('_raw')}() returned an error string for a failure of "
                      f"tool '{self.name}'; this is deprecated and raises from toolkeeper "
                      f"0.3.0 — call {instead}() to get the exception", DeprecationWarning,
                      stacklevel=3)
        return f"Error executing {self.name}: {exc}"

    def __call__(self, *args: object, **kwargs: object) -> object:
        """Call the underlying function directly, as if the tool were not there."""
        return self._require_callable()(*args, **kwargs)

    # -- export -------------------------------------------------------------------------

    def get_schema(
        self, api_format: str = "openai-chat", *, strict: bool = False,
        think_augment: bool | None = None, _think_augment: bool | None = None,
    ) -> JsonObject:
        """The tool's declaration in a provider's wire format (default ``openai-chat``).

        Formats: ``openai-chat``, ``openai-responses`` (``openai-response`` too), ``anthropic``,
        ``gemini``, ``mcp`` and ``native``. ``think_augment`` adds the ``toolcall_reason``
        argument; ``None`` falls back to ``metadata.think_augment``. ``_think_augment`` is the
        registry library's spelling, kept for good: a name of the public contract. The result is cached
        and shared: copy it before changing it.
        """
        if think_augment is None:
            think_augment = _think_augment
        if not strict and think_augment is None:  # the repeat export: one dict lookup
            spec = self._spec or self.spec
            hit = spec.declared.get(api_format)
            if hit is not None:
                return hit[0]
        return declare(self, api_format, strict=strict, think_augment=think_augment)

    def describe(self, api_format: str = "openai-chat") -> JsonObject:
        """Deprecated alias of ``get_schema``; goes away in 0.3.0."""
        warnings.warn("Tool.describe() is deprecated and goes away in 0.3.0; use get_schema()",
                      DeprecationWarning,
                      stacklevel=2)
        return self.get_schema(api_format)

    def get_json_schema(self, api_format: str = "openai-chat") -> JsonObject:
        """Deprecated alias of ``get_schema``; goes away in 0.3.0."""
        warnings.warn("Tool.get_json_schema() is deprecated and goes away in 0.3.0; use "
                      "get_schema()",
                      DeprecationWarning, stacklevel=2)
        return self.get_schema(api_format)

    def get_openai_schema(self, *, strict: bool = False) -> JsonObject:
        """``get_schema("openai-chat")`` under the name a capability registry uses; a
        second name, kept for good: a name of the public contract that programs written for it use."""
        return self.get_schema("openai-chat", strict=strict)

    def get_mcp_schema(self) -> JsonObject:
        """``get_schema("mcp")`` under the name a capability registry uses; a second name,
        kept for good: a name of the public contract that programs written for it use."""
        return self.get_schema("mcp")

    def check(self, api_format: str, *, strict: bool = False) -> list[Problem]:
        """Problems exporting this tool to ``api_format`` would meet (see ``formats.check``)."""
        return list(check_export(self, api_format, strict=strict))

    @property
    def spec(self) -> ToolSpec:
        """The frozen spec the wire formats declare (made on first use, new after a change)."""
        spec = self._spec
        if spec is None:
            spec = self._spec = ToolSpec.trusted(
                name=self.name, description=self.description, parameters=self.parameters,
                output=lambda: self.output_schema, metadata=self.metadata,
                namespace=self.namespace, method_name=self.method_name,
                qualified_name=self.qualified_name, risk=self.risk, hitl_mode=self.hitl_mode)
        return spec

    def model_dump(self) -> JsonObject:
        """The definition as plain data (the callable is left out)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "output_schema": self.output_schema,
            "namespace": self.namespace,
            "method_name": self.method_name,
            "risk": self.risk.value,
            "hitl_mode": self.hitl_mode.value,
            "metadata": self.metadata.model_dump(mode="json", by_alias=False),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, risk={self.risk.value!r})"
