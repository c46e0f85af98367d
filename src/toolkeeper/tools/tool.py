"""``Tool``: a frozen tool definition plus the callable that implements it."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..core.context import ToolContext
from ..core.json import JsonObject
from ..core.metadata import DEFAULT_METADATA, ToolMetadata
from ..core.results import ToolResult, to_tool_result
from ..core.risk import HitlMode, ToolRisk, default_hitl_mode
from ..core.spec import ToolKind, ToolSpec
from ..errors import InvalidOutputError, UsageError
from ..formats.registry import check as check_export
from ..formats.registry import declare
from .naming import NameSeparator, normalize_tool_name, qualify, split_qualified
from .rawschema import normalize_schema
from .runner import call_async, call_sync
from .signature import FunctionInfo, inspect_function, is_async_callable
from .validation import (
    ArgumentValidator,
    FunctionArgumentValidator,
    ModelArgumentValidator,
    SchemaArgumentValidator,
)

__all__ = ["Tool"]

_ASYNC_METADATA = ToolMetadata(is_async=True)
_DEFINITION_FIELDS = frozenset(
    {"name", "description", "parameters", "callable", "metadata", "namespace", "method_name",
     "risk", "hitl_mode", "preflight"}
)


class Tool:
    """One tool: a name, a description, a JSON Schema of its parameters and the callable.

    Build one from a function (``Tool.from_function`` or ``@tool``), from a raw JSON Schema and a
    callable (``Tool(name=..., description=..., parameters=..., callable=...)``), or by
    subclassing ``BaseTool``. A tool is frozen once built: derive changed copies with
    ``replace`` or ``with_namespace``.

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
        preflight: The tool's pre-flight check, if it declares one: called with a call's
            validated arguments (as keywords) before a person is asked, it raises what the
            tool's own run would raise for them (sync or async; ``BaseTool``: a method).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    callable: Callable[..., Any] | None
    metadata: ToolMetadata
    namespace: str | None
    method_name: str | None
    _parameters_model: Any
    schema_warnings: tuple[str, ...]
    _info: FunctionInfo | None
    _validator: ArgumentValidator | None
    _spec: ToolSpec | None
    _explicit_output: dict[str, Any] | None

    # Class-level defaults that BaseTool subclasses override; a class-level hitl_mode of None
    # means "the default for the risk" and every instance holds a resolved HitlMode.
    risk: ToolRisk = ToolRisk.SAFE
    hitl_mode: HitlMode = None  # type: ignore[assignment]
    hitl_explicit: bool
    """Whether the HITL mode was chosen (argument, class attribute or ``replace``) rather than
    inherited from the risk."""
    preflight: Callable[..., Any] | None = None
    kind: ClassVar[ToolKind] = "function"
    runs_scripts: ClassVar[bool] = False
    """Whether the tool runs code-mode scripts (``tool_chain``): a script may not call it."""
    _frozen: ClassVar[bool] = False

    def __init__(
        self,
        *,
        name: str,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        callable: Callable[..., Any] | None = None,
        metadata: ToolMetadata | None = None,
        namespace: str | None = None,
        method_name: str | None = None,
        risk: ToolRisk | str | None = None,
        hitl_mode: HitlMode | str | None = None,
        is_async: bool | None = None,
        output_schema: Mapping[str, Any] | None = None,
        parameters_model: object = None,
        input_schema: Mapping[str, Any] | None = None,
        preflight: Callable[..., Any] | None = None,
        _info: FunctionInfo | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"a tool needs a non-empty string name, got {name!r}")
        detected_async = is_async_callable(callable) if callable is not None else False
        schema = parameters if parameters is not None else input_schema
        self.__dict__.update(
            name=name,
            description=description or "",
            callable=callable,
            namespace=namespace,
            method_name=method_name,
            _parameters_model=parameters_model,
            _info=_info,
            _validator=None,
            _spec=None,
            _explicit_output=dict(output_schema) if output_schema is not None else None,
            **({"preflight": preflight} if preflight is not None else {}),
        )
        if _info is not None:
            self.__dict__["parameters"] = _info.parameters
            self.__dict__["schema_warnings"] = ()
        else:
            fixed, problems = normalize_schema(schema, where=f"tool '{name}' parameters")
            self.__dict__["parameters"] = fixed
            self.__dict__["schema_warnings"] = tuple(problems)
        self.__dict__["metadata"] = _metadata(metadata, detected_async or bool(is_async))
        resolved_risk = ToolRisk(risk) if risk is not None else ToolRisk(type(self).risk)
        self.__dict__["risk"] = resolved_risk
        chosen = hitl_mode if hitl_mode is not None else type(self).hitl_mode
        self.__dict__["hitl_mode"] = (
            HitlMode(chosen) if chosen is not None else default_hitl_mode(resolved_risk)
        )
        self.__dict__["hitl_explicit"] = chosen is not None
        if _info is None and parameters_model is None and callable is not None:
            # Compile a raw schema now: a schema the validator cannot read is a definition error.
            self.__dict__["_validator"] = self._build_validator()
        self.__dict__["_frozen"] = True

    def __setattr__(self, key: str, value: object) -> None:
        if key in _DEFINITION_FIELDS and self.__dict__.get("_frozen"):
            raise UsageError(
                f"tool '{self.name}' is frozen: use tool.replace({key}=...) to derive a changed copy"
            )
        object.__setattr__(self, key, value)

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        namespace: str | None = None,
        method_name: str | None = None,
        metadata: ToolMetadata | None = None,
        *,
        risk: ToolRisk | str | None = None,
        hitl_mode: HitlMode | str | None = None,
        preflight: Callable[..., Any] | None = None,
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
        tool_name = info.func_name
        ns = normalize_tool_name(namespace) if namespace else None
        method = method_name or tool_name
        if ns:
            tool_name = qualify(ns, method)
        return cls(
            name=tool_name,
            description=info.description,
            callable=func,
            metadata=metadata,
            namespace=ns,
            method_name=method,
            risk=risk,
            hitl_mode=hitl_mode,
            preflight=preflight,
            _info=info,
        )

    def replace(self, **changes: Any) -> Tool:
        """A copy of this tool with some definition fields changed."""
        unknown = set(changes) - _DEFINITION_FIELDS
        if unknown:
            raise UsageError(f"replace() got unknown field(s) {sorted(unknown)}")
        clone = copy.copy(self)
        clone.__dict__.update(changes, _spec=None)
        if "parameters" in changes:
            fixed, problems = normalize_schema(changes["parameters"], where=f"tool '{clone.name}'")
            clone.__dict__.update(parameters=fixed, schema_warnings=tuple(problems), _info=None,
                                  _validator=None)
        for key, enum in (("risk", ToolRisk), ("hitl_mode", HitlMode)):
            if key in changes:
                clone.__dict__[key] = enum(changes[key])
        if "hitl_mode" in changes:
            clone.__dict__["hitl_explicit"] = True
        elif "risk" in changes and not self.__dict__.get("hitl_explicit"):
            clone.__dict__["hitl_mode"] = default_hitl_mode(clone.risk)
        return clone

    def with_descriptions(
        self, description: str | None = None, parameters: dict[str, str] | None = None
    ) -> Tool:
        """A copy with another description and parameter descriptions (e.g. localized).

        Validation is unchanged: descriptions are shown to the model, never checked.
        """
        clone = self.replace(description=description) if description else self.replace()
        if parameters:
            props = dict(self.parameters.get("properties") or {})
            for name, text in parameters.items():
                if isinstance(props.get(name), dict):
                    props[name] = {**props[name], "description": text}
            clone.__dict__["parameters"] = {**self.parameters, "properties": props}
        return clone

    @property
    def qualified_name(self) -> str:
        """``{namespace}-{method_name}`` when both are set, else ``name``."""
        if self.namespace and self.method_name:
            return qualify(self.namespace, self.method_name)
        return self.name

    def update_namespace(
        self, namespace: str | None, force: bool = False, sep: NameSeparator = "-"
    ) -> Tool:
        """Put the tool into a namespace, in place (seed 002), and return it.

        A name that already carries a namespace (a ``namespace`` field, or ``-``/``.`` in the
        name) keeps it unless ``force``; the separator is rewritten to ``sep`` either way. This is
        the one in-place change a frozen tool allows — do it before the tool is registered, or
        use ``with_namespace`` for a copy.
        """
        if not namespace:
            return self
        new_ns, method = self._namespace_parts(normalize_tool_name(namespace), force)
        self.__dict__.update(
            name=qualify(new_ns, method, sep), namespace=new_ns, method_name=method,
            _spec=None,
        )
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

    @property
    def parameters_model(self) -> Any:
        """The pydantic model of the parameters: the one given, or for a tool made from a
        function the one generated from its signature (built on first access); ``None`` for a
        raw JSON Schema."""
        explicit = self.__dict__.get("_parameters_model")
        if explicit is not None:
            return explicit
        info: FunctionInfo | None = self._info
        return info.parameters_model if info is not None else None

    @property
    def is_async(self) -> bool:
        """Whether the callable is a coroutine function (``metadata.is_async``)."""
        return self.metadata.is_async

    @property
    def input_schema(self) -> JsonObject:
        """Seed 000/001's name for ``parameters``."""
        return self.parameters

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """JSON Schema of the structured result, from the return annotation or given explicitly."""
        if self._explicit_output is not None:
            return self._explicit_output
        info: FunctionInfo | None = self._info
        return info.output_schema if info is not None else None

    # -- validation and calls ------------------------------------------------------------

    def validate_arguments(self, arguments: Mapping[str, object]) -> dict[str, Any]:
        """Validate and coerce a model's arguments into the callable's keyword arguments.

        Raises:
            InvalidArgumentsError: naming each bad field path, what was expected and received.
        """
        validator: ArgumentValidator | None = self._validator
        if validator is None:
            validator = self._build_validator()
            self.__dict__["_validator"] = validator
        return validator(arguments)

    def _build_validator(self) -> ArgumentValidator:
        unknown = self.metadata.unknown_arguments
        explicit = self.__dict__.get("_parameters_model")
        if explicit is not None:
            return ModelArgumentValidator(explicit)
        if self._info is not None:
            return FunctionArgumentValidator(self.name, self._info, unknown)
        return SchemaArgumentValidator(self.name, self.parameters, unknown)

    def _require_callable(self) -> Callable[..., Any]:
        func = self.callable
        if func is None:
            raise UsageError(f"tool '{self.name}' has no callable to run")
        return func

    def _ctx_param(self) -> str | None:
        info: FunctionInfo | None = self._info
        return info.ctx_param if info is not None else None

    def _positional(self) -> tuple[str, ...]:
        info: FunctionInfo | None = self._info
        if info is None:
            return ()
        return tuple(p.name for p in info.params if p.positional_only)

    def call_sync(self, kwargs: dict[str, object], ctx: ToolContext | None = None) -> Any:
        """Call the callable with validated arguments from synchronous code; returns its value."""
        return call_sync(self._require_callable(), kwargs, self._binding(ctx))

    async def call_async(self, kwargs: dict[str, object], ctx: ToolContext | None = None) -> Any:
        """Call the callable with validated arguments; sync callables run in a worker thread."""
        return await call_async(
            self._require_callable(), kwargs, self._binding(ctx),
            in_thread=not self.is_async and not self.metadata.inline,
        )

    def _binding(self, ctx: ToolContext | None) -> tuple[tuple[str, ...], str | None, Any]:
        ctx_param = self._ctx_param()
        if ctx_param is not None and ctx is None:
            ctx = ToolContext(tool_name=self.name)
        return self._positional(), ctx_param, ctx

    def to_result(self, value: object) -> ToolResult:
        """Coerce a return value into a ``ToolResult``, checking it against the output type."""
        info: FunctionInfo | None = self._info
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

    async def execute(self, ctx: ToolContext | None = None, /, **kwargs: Any) -> ToolResult:
        """Seed 001's protocol: run with already-validated arguments and return a ``ToolResult``."""
        return self.to_result(await self.call_async(kwargs, ctx))

    def run_raw(self, parameters: Mapping[str, object]) -> Any:
        """Validate and run synchronously, returning the raw value; exceptions propagate."""
        return self.call_sync(self.validate_arguments(parameters))

    async def arun_raw(self, parameters: Mapping[str, object]) -> Any:
        """Validate and run asynchronously, returning the raw value; exceptions propagate."""
        return await self.call_async(self.validate_arguments(parameters))

    def run(self, parameters: Mapping[str, object]) -> Any:
        """Like ``run_raw`` but a failure returns ``"Error executing <name>: <reason>"``.

        .. deprecated:: swallowing the exception emits a ``DeprecationWarning``; use
           ``run_raw`` to get the exception.
        """
        try:
            return self.run_raw(parameters)
        except Exception as exc:
            return self._swallowed(exc, "run_raw")

    async def arun(self, parameters: Mapping[str, object]) -> Any:
        """Like ``arun_raw`` but a failure returns ``"Error executing <name>: <reason>"``.

        .. deprecated:: swallowing the exception emits a ``DeprecationWarning``; use
           ``arun_raw`` to get the exception.
        """
        try:
            return await self.arun_raw(parameters)
        except Exception as exc:
            return self._swallowed(exc, "arun_raw")

    def _swallowed(self, exc: Exception, instead: str) -> str:
        warnings.warn(f"{instead.removesuffix('_raw')}() returned an error string for a failure of "
                      f"tool '{self.name}'; this is deprecated and will raise in a future "
                      f"version — call {instead}() to get the exception", DeprecationWarning,
                      stacklevel=3)
        return f"Error executing {self.name}: {exc}"

    def __call__(self, *args: object, **kwargs: object) -> Any:
        """Call the underlying function directly, as if the tool were not there."""
        return self._require_callable()(*args, **kwargs)

    # -- export -------------------------------------------------------------------------

    def get_schema(
        self, api_format: str = "openai-chat", *, strict: bool = False,
        think_augment: bool | None = None, _think_augment: bool | None = None,
    ) -> JsonObject:
        """The tool's declaration in a provider's wire format (default ``openai-chat``).

        Formats: ``openai-chat``, ``openai-responses`` (``openai-response`` too), ``anthropic``,
        ``gemini``, ``mcp`` and ``native``. ``think_augment`` (also accepted under its older
        name ``_think_augment``) adds the ``toolcall_reason`` argument; ``None`` falls back to
        ``metadata.think_augment``. The result is cached and shared: copy it before changing it.
        """
        if think_augment is None:
            think_augment = _think_augment
        if not strict and think_augment is None:  # the repeat export: one dict lookup
            spec = self.__dict__["_spec"] or self.spec
            hit = spec.declared.get(api_format)
            if hit is not None:
                return hit[0]
        return declare(self, api_format, strict=strict, think_augment=think_augment)

    def describe(self, api_format: str = "openai-chat") -> JsonObject:
        """Deprecated alias of ``get_schema``."""
        warnings.warn("Tool.describe() is deprecated; use get_schema()", DeprecationWarning,
                      stacklevel=2)
        return self.get_schema(api_format)

    def get_json_schema(self, api_format: str = "openai-chat") -> JsonObject:
        """Deprecated alias of ``get_schema``."""
        warnings.warn("Tool.get_json_schema() is deprecated; use get_schema()",
                      DeprecationWarning, stacklevel=2)
        return self.get_schema(api_format)

    def get_openai_schema(self, *, strict: bool = False) -> JsonObject:
        """Seed 000's shortcut for ``get_schema("openai-chat")``."""
        return self.get_schema("openai-chat", strict=strict)

    def get_mcp_schema(self) -> JsonObject:
        """Seed 000's shortcut for ``get_schema("mcp")``."""
        return self.get_schema("mcp")

    def check(self, api_format: str, *, strict: bool = False) -> list[Any]:
        """Problems exporting this tool to ``api_format`` would meet (see ``formats.check``)."""
        return list(check_export(self, api_format, strict=strict))

    @property
    def spec(self) -> ToolSpec:
        """The frozen spec the wire formats declare (made on first use, new after a change)."""
        spec: ToolSpec | None = self.__dict__.get("_spec")
        if spec is None:
            spec = self.__dict__["_spec"] = ToolSpec.trusted(
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


def _metadata(metadata: ToolMetadata | None, is_async: bool) -> ToolMetadata:
    if metadata is None:
        return _ASYNC_METADATA if is_async else DEFAULT_METADATA
    if metadata.is_async == is_async:
        return metadata
    return metadata.model_copy(update={"is_async": is_async})
