"""``Tool`` as toolregistry defines it: a frozen dataclass of ``name``, ``description``,
``parameters``, ``callable``, ``metadata``, ``parameters_model``, ``namespace`` and
``method_name`` — made by ``dataclasses.replace`` as well as by its constructor — standing for a
toolkeeper ``Tool`` (``tool.core``) that validates its arguments and declares it to providers.

What differs from toolkeeper's own ``Tool``: ``get_schema`` leaves ``toolcall_reason`` out unless
``metadata.think_augment`` or ``_think_augment`` is ``True``; ``run`` raises and ``run_raw`` is
its deprecated alias; ``update_namespace`` returns a copy; arguments the schema does not declare
are dropped rather than refused; ``description`` is the docstring as written.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import json
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, cast

from pydantic import BaseModel

from ...core.context import ToolContext
from ...core.json import JsonObject
from ...errors import SchemaError, UsageError
from ...formats.base import THINK_PROPERTY
from ...tools.naming import normalize_tool_name
from ...tools.signature import is_async_callable
from ...tools.tool import Tool as CoreTool
from .calls import api_format as canonical_format
from .metadata import ToolMetadata, ToolTag, core_metadata

__all__ = ["Tool", "ToolMetadata", "ToolTag"]

NameSeparator = Literal["-", "."]
THINK_FIELD = "toolcall_reason"
_T = TypeVar("_T", bound="Tool")
_OPEN = {"type": "object", "properties": {}, "additionalProperties": True}


@dataclass(frozen=True, init=False)
class Tool:
    """A tool as toolregistry documents it; ``core`` is the toolkeeper ``Tool`` behind it."""

    name: str
    description: str
    parameters: dict[str, Any]  # a JSON Schema, typed as toolregistry and pydantic type one
    callable: Callable[..., Any]  # the user's function, returning what it returns
    metadata: ToolMetadata
    parameters_model: type[BaseModel] | None
    namespace: str | None
    method_name: str | None

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __init__(
        self, *, name: str, description: str, parameters: Mapping[str, object],
        callable: Callable[..., object], metadata: ToolMetadata | None = None,
        parameters_model: type[BaseModel] | None = None, namespace: str | None = None,
        method_name: str | None = None, is_async: bool | None = None,
    ) -> None:
        if metadata is None:
            metadata = ToolMetadata(is_async=is_async) if is_async is not None else ToolMetadata()
        core = _core_for(name, description, _object_schema(parameters), callable, metadata,
                         parameters_model)
        self._fill(core, metadata, callable, parameters_model, namespace, method_name)

    def _fill(self, core: CoreTool, metadata: ToolMetadata, func: Callable[..., object],
              parameters_model: type[BaseModel] | None, namespace: str | None,
              method_name: str | None) -> None:
        if not metadata.schema_hash:
            metadata = dataclasses.replace(metadata, schema_hash=_schema_hash(core.parameters))
        values = {"name": core.name, "description": core.description,
                  "parameters": core.parameters, "callable": func, "metadata": metadata,
                  "parameters_model": parameters_model, "namespace": namespace,
                  "method_name": method_name, "_core": core}
        for key, value in values.items():
            object.__setattr__(self, key, value)

    @classmethod
    def _made(cls: type[_T], core: CoreTool, metadata: ToolMetadata, func: Callable[..., object],
              method_name: str | None) -> _T:
        tool = cls.__new__(cls)
        tool._fill(core, metadata, func, core.parameters_model, None, method_name)
        return tool

    @property
    def core(self) -> CoreTool:
        """The toolkeeper ``Tool`` this one stands for: give it to a ``Toolbox``, a
        ``ToolInvoker`` or ``toolkeeper serve`` to run it behind toolkeeper's gates."""
        return cast(CoreTool, self.__dict__["_core"])

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_function(
        cls: type[_T], func: Callable[..., object], name: str | None = None,
        description: str | None = None, namespace: str | None = None,
        method_name: str | None = None, metadata: ToolMetadata | None = None,
        sep: NameSeparator = "-",
    ) -> _T:
        """A tool from a function: its (normalized) name, its docstring as the description,
        its signature as the schema; ``metadata.is_async`` is always detected.

        Raises:
            ValueError: for an unnamed lambda without ``name``.
            UsageError: for a parameter named ``ctx``, where toolkeeper passes a
                ``ToolContext`` (rename it).
        """
        raw = str(name or getattr(func, "__name__", "<unknown>"))
        if raw == "<lambda>":
            raise ValueError("You must provide a name for lambda functions")
        _refuse_ctx(func, raw)
        func_name = normalize_tool_name(raw)
        doc = description or func.__doc__ or ""
        detected = is_async_callable(func)
        meta = (dataclasses.replace(metadata, is_async=detected) if metadata is not None
                else ToolMetadata(is_async=detected))
        tool = cls._made(_function_core(func, func_name, doc, meta), meta, func,
                         method_name or func_name)
        return tool.update_namespace(namespace, sep=sep) if namespace else tool

    # -- views --------------------------------------------------------------------------

    @property
    def fn(self) -> Callable[..., Any]:
        """The function the tool calls."""
        return self.callable

    @property
    def is_async(self) -> bool:
        return self.metadata.is_async

    @property
    def execution_hints(self) -> dict[str, bool]:
        return self.metadata.execution_hints

    @property
    def qualified_name(self) -> str:
        """The name (it already carries the namespace)."""
        return self.name

    def to_dict(self) -> dict[str, object]:
        """The definition as data (the callable left out)."""
        return {"name": self.name, "description": self.description,
                "parameters": self.parameters, "metadata": dataclasses.asdict(self.metadata),
                "namespace": self.namespace, "method_name": self.method_name}

    def model_dump(self) -> dict[str, object]:
        return self.to_dict()

    # -- declarations -------------------------------------------------------------------

    def get_schema(self, api_format: str = "openai-chat", *,
                   _think_augment: bool | None = None) -> JsonObject:
        """The declaration in ``api_format`` (``openai-chat``, ``openai-responses``,
        ``anthropic``, ``gemini``, ``google-interactions``, ``rosetta-ir``); ``toolcall_reason``
        only when ``_think_augment`` (else ``metadata.think_augment``) is ``True``."""
        fmt = canonical_format(api_format)
        effective = _think_augment if _think_augment is not None else self.metadata.think_augment
        think = effective is True
        declared: JsonObject
        if fmt in ("google-interactions", "rosetta-ir"):
            schema = self.core.get_schema("anthropic", think_augment=think)["input_schema"]
            declared = {"type": "function", "name": self.name, "description": self.description,
                        "parameters": copy.deepcopy(schema)}
        else:
            declared = copy.deepcopy(self.core.get_schema(fmt, think_augment=think))
        if think:  # the asked-for reason replaces an argument of the function's own by its name
            _add_reason(declared)
        return declared

    def get_json_schema(self, api_format: str = "openai-chat") -> JsonObject:
        warnings.warn("get_json_schema() is deprecated, use get_schema() instead.",
                      DeprecationWarning, stacklevel=2)
        return self.get_schema(api_format)

    def describe(self, api_format: str = "openai-chat") -> JsonObject:
        warnings.warn("describe() is deprecated, use get_schema() instead.",
                      DeprecationWarning, stacklevel=2)
        return self.get_schema(api_format)

    # -- validation and calls -------------------------------------------------------------

    def validate_parameters(self, parameters: Mapping[str, object]) -> dict[str, object]:
        """The arguments validated against the schema and coerced ("5" → 5); undeclared ones
        dropped.

        Raises:
            InvalidArgumentsError: a ``ValueError`` naming each bad argument.
        """
        return self.core.validate_arguments(_without_reason(parameters))

    _validate_parameters = validate_parameters

    def run(self, parameters: Mapping[str, object]) -> Any:
        """Validate and call; returns the function's value, exceptions propagate."""
        return self.core.run_raw(_without_reason(parameters))

    async def arun(self, parameters: Mapping[str, object]) -> Any:
        """Validate and call from async code (a sync function runs in a worker thread)."""
        return await self.core.arun_raw(_without_reason(parameters))

    def run_raw(self, parameters: Mapping[str, object]) -> Any:
        warnings.warn("Tool.run_raw() is deprecated; use Tool.run() instead.",
                      DeprecationWarning, stacklevel=2)
        return self.run(parameters)

    async def arun_raw(self, parameters: Mapping[str, object]) -> Any:
        warnings.warn("Tool.arun_raw() is deprecated; use Tool.arun() instead.",
                      DeprecationWarning, stacklevel=2)
        return await self.arun(parameters)

    # -- names ----------------------------------------------------------------------------

    def update_namespace(self: _T, namespace: str | None, force: bool = False,
                         sep: NameSeparator = "-") -> _T:
        """A copy in ``namespace``; a name already qualified (a namespace, or ``-``/``.`` in
        the name) is kept unless ``force``. Returns this tool when nothing changes."""
        if not namespace:
            return self
        if not force and (self.namespace or any(s in self.name for s in "-.")):
            return self
        normalized = normalize_tool_name(namespace)
        method = self.method_name or (self.name.split(sep, 1)[1] if sep in self.name
                                      else self.name)
        rest = self.name.split(sep, 1)[1] if sep in self.name else self.name
        return dataclasses.replace(self, name=f"{normalized}{sep}{rest}", namespace=normalized,
                                   method_name=method)

    def requalify(self: _T, namespace: str | None, sep: NameSeparator = "-") -> _T:
        """A copy named from ``namespace`` and ``method_name`` (``None``: the method name)."""
        method = self.method_name or self._method_name_from_name(sep)
        if not namespace:
            return dataclasses.replace(self, name=method, namespace=None, method_name=method)
        normalized = normalize_tool_name(namespace)
        return dataclasses.replace(self, name=f"{normalized}{sep}{method}",
                                   namespace=normalized, method_name=method)

    def _method_name_from_name(self, sep: NameSeparator) -> str:
        if self.namespace:
            for boundary in (f"{self.namespace}{sep}", f"{self.namespace}-",
                             f"{self.namespace}."):
                if self.name.startswith(boundary):
                    return self.name[len(boundary):]
        for boundary_sep in ("-", "."):
            if boundary_sep in self.name:
                return self.name.split(boundary_sep, 1)[1]
        return self.name

    def with_refreshed_at(self: _T, timestamp: str) -> _T:
        return dataclasses.replace(
            self, metadata=dataclasses.replace(self.metadata, last_refreshed_at=timestamp))


def _add_reason(declared: JsonObject) -> None:
    """Offer ``toolcall_reason`` in a declaration (in place: it is a copy)."""
    function = declared.get("function")
    body = function if isinstance(function, dict) else declared
    params = body.get("parameters") or body.get("input_schema")
    if not isinstance(params, dict):
        return
    properties = params.setdefault("properties", {})
    if isinstance(properties, dict):
        properties[THINK_FIELD] = dict(THINK_PROPERTY)


def _without_reason(parameters: Mapping[str, object]) -> dict[str, object]:
    return {k: v for k, v in parameters.items() if k != THINK_FIELD}


def _object_schema(parameters: Mapping[str, object] | None) -> Mapping[str, object]:
    """toolregistry's rule: a schema that is not an object becomes an empty object schema."""
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return {"type": "object", "properties": {}}
    if not isinstance(parameters.get("properties"), dict):
        return {**parameters, "properties": {}}
    return parameters


def _schema_hash(parameters: Mapping[str, object]) -> str:
    canonical = json.dumps(parameters, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _refuse_ctx(func: Callable[..., object], name: str) -> None:
    try:
        param = inspect.signature(func).parameters.get("ctx")
    except (TypeError, ValueError):
        return
    if param is not None and param.annotation is not ToolContext:
        raise UsageError(f"function '{name}' has a parameter named 'ctx', where toolkeeper "
                         "passes a ToolContext instead of an argument from the model; rename "
                         "it (or annotate it ToolContext to receive the context)")


def _function_core(func: Callable[..., object], name: str, description: str,
                   metadata: ToolMetadata) -> CoreTool:
    """The toolkeeper tool of a function; one whose signature has no schema (``*args``)
    takes any arguments unvalidated, with a warning, as toolregistry registers it."""
    try:
        return CoreTool.from_function(func, name=name, description=description,
                                      metadata=core_metadata(metadata))
    except SchemaError as exc:
        warnings.warn(f"Failed to generate parameter model for '{name}': {exc}. The tool will "
                      "be registered without parameter validation.", UserWarning, stacklevel=3)
        return CoreTool(name=name, description=description, parameters=_OPEN, callable=func,
                        metadata=core_metadata(metadata))


def _core_for(name: str, description: str, parameters: Mapping[str, object],
              func: Callable[..., object], metadata: ToolMetadata,
              model: type[BaseModel] | None) -> CoreTool:
    """The toolkeeper tool behind a constructed (or replaced) tool: a function's own when its
    schema is the one given (its types validate: a model comes back as a model), else the
    given schema's."""
    if model is not None and (inspect.isfunction(func) or inspect.ismethod(func)):
        try:
            found = CoreTool.from_function(func, name=name, description=description,
                                           metadata=core_metadata(metadata))
        except SchemaError:
            found = None
        if found is not None and found.parameters == parameters:
            return found
    return CoreTool(name=name, description=description, parameters=parameters, callable=func,
                    metadata=core_metadata(metadata))
