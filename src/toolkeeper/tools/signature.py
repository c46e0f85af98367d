"""Inspect a function once: its parameters, their JSON Schema, its docstring and return type.

Common parameter types (str, int, float, bool, None, list/dict of those, Optional, unions and
Literal) get their JSON Schema from a fast path whose output equals pydantic's (a property test
holds the two together); anything else — models, dataclasses, TypedDicts, enums, Annotated — goes
through pydantic. The pydantic model that validates arguments is built on first use.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, Union, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ..core.context import ToolContext
from ..core.json import JsonObject, JsonValue
from ..core.results import ToolResult
from ..errors import SchemaError
from .docstrings import parse_docstring

__all__ = ["FunctionInfo", "Param", "inspect_function", "strip_titles"]

EMPTY: object = inspect.Parameter.empty
_PRIMITIVES: dict[object, JsonObject] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}
_JSON_SCALARS = (str, int, float, bool, type(None))
_NO_OUTPUT = {EMPTY, Any, None, type(None)}


@dataclass(frozen=True, slots=True)
class Param:
    """One model-visible parameter of a function."""

    name: str
    annotation: object
    default: object
    positional_only: bool
    description: str | None
    field_info: FieldInfo | None = None

    @property
    def required(self) -> bool:
        return self.default is EMPTY


_EXACT = (int, float, str, bool)


@dataclass(frozen=True)
class FunctionInfo:
    """Everything toolkeeper learns from a function, computed once."""

    func_name: str
    description: str
    params: tuple[Param, ...]
    parameters: JsonObject
    ctx_param: str | None
    return_annotation: object
    is_async: bool
    returns_doc: str | None = None
    _model: type[BaseModel] | None = field(default=None, repr=False)

    @cached_property
    def positional(self) -> tuple[str, ...]:
        """The names of the positional-only parameters (passed by position, in order)."""
        return tuple(p.name for p in self.params if p.positional_only)

    @cached_property
    def args_model(self) -> type[BaseModel]:
        """The pydantic model that validates arguments (unknown keys forbidden)."""
        return self._model or _build_model(self.func_name, self.params)

    @cached_property
    def parameters_model(self) -> type[BaseModel]:
        """A pydantic model of the parameters under their own names (``Tool.parameters_model``);
        a name a model cannot hold as a field (``schema``, ``_x``) gets a trailing ``_`` and the
        real name as its alias."""
        fields: dict[str, Any] = {}  # pydantic's create_model takes any type form
        for param in self.params:
            default = ... if param.required else param.default
            info = FieldInfo.merge_field_infos(param.field_info or FieldInfo.from_field(default),
                                               Field(description=param.description))
            name = param.name
            if name.startswith("_") or hasattr(BaseModel, name):
                name, info = f"{name}_", FieldInfo.merge_field_infos(info, Field(alias=param.name))
            fields[name] = (param.annotation, info)
        model: type[BaseModel] = create_model(
            f"{self.func_name}_parameters", __config__=ConfigDict(populate_by_name=True),
            **fields)
        return model

    @cached_property
    def output_adapter(self) -> TypeAdapter[object] | None:
        """Validator of the return value, or ``None`` when the return type says nothing."""
        if _says_nothing(self.return_annotation):
            return None
        return TypeAdapter(cast("type[object]", self.return_annotation))  # any type form

    def output_problem(self, value: object) -> str | None:
        """Why ``value`` does not match the return annotation, or ``None`` when it does."""
        if self.return_annotation in _EXACT and type(value) is self.return_annotation:
            return None  # the common case needs no validator
        adapter = self.output_adapter
        if adapter is None:
            return None
        try:
            adapter.validate_python(value)
        except Exception as exc:
            return " ".join(str(exc).split())[:300]
        return None

    @cached_property
    def output_schema(self) -> JsonObject | None:
        """JSON Schema of the structured result (scalars wrapped as ``{"result": ...}``)."""
        if _says_nothing(self.return_annotation):
            return None
        # Common return types need no pydantic adapter: building one per tool made the first
        # export of 20,000 tools take 6 s (0.3 ms each).
        schema = fast_schema(self.return_annotation)
        if schema is None:
            adapter = self.output_adapter
            if adapter is None:
                return None
            schema = strip_titles(adapter.json_schema(mode="serialization"))
        if _is_object_schema(schema):
            return schema
        wrapped: JsonObject = {
            "type": "object",
            "properties": {"result": schema},
            "required": ["result"],
            "x-toolkeeper-wrap-result": True,
        }
        return wrapped

    @cached_property
    def wraps_output(self) -> bool:
        schema = self.output_schema
        return bool(schema and schema.get("x-toolkeeper-wrap-result"))


def _says_nothing(annotation: object) -> bool:
    if annotation in _NO_OUTPUT:
        return True
    return isinstance(annotation, type) and issubclass(annotation, ToolResult)


def _is_object_schema(schema: JsonObject) -> bool:
    if schema.get("type") == "object":
        return True
    ref, defs = schema.get("$ref"), schema.get("$defs")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
        target = defs.get(ref.rsplit("/", 1)[-1])
        return isinstance(target, dict) and target.get("type") == "object"
    return False


def _is_ctx(name: str, annotation: object) -> bool:
    if name == "ctx":
        return True
    return isinstance(annotation, type) and issubclass(annotation, ToolContext)


def _func_name(func: Callable[..., object], name: str | None) -> str:
    if name:
        return name
    raw = getattr(func, "__name__", None) or type(func).__name__
    if raw == "<lambda>":
        raise SchemaError(
            "cannot name an unnamed lambda as a tool: pass name='...' "
            "(for example Tool.from_function(lambda a, b: a * b, name='multiply'))"
        )
    return str(raw)


def inspect_function(
    func: Callable[..., object], *, name: str | None = None, description: str | None = None
) -> FunctionInfo:
    """Read a function's parameters, docstring and return type into a ``FunctionInfo``.

    Raises:
        SchemaError: for an unnamed lambda, ``*args``/``**kwargs``, or a parameter whose type
            cannot be expressed as JSON Schema; the message names the function and parameter.
    """
    func_name = _func_name(func, name)
    try:
        sig = inspect.signature(func, eval_str=True)
    except NameError as exc:
        raise SchemaError(
            f"function '{func_name}': a type hint cannot be resolved ({exc}); "
            "import the type at module level"
        ) from exc
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"function '{func_name}': no inspectable signature ({exc})") from exc
    doc = parse_docstring(inspect.getdoc(func) if callable(func) else None)
    params, ctx_param = _collect_params(func_name, sig, doc.params)
    schema, model = _parameters_schema(func_name, params)
    return FunctionInfo(
        func_name=func_name,
        description=description if description is not None else doc.description,
        params=params,
        parameters=schema,
        ctx_param=ctx_param,
        return_annotation=sig.return_annotation,
        is_async=is_async_callable(func),
        returns_doc=doc.returns,
        _model=model,
    )


def is_async_callable(func: object) -> bool:
    """True for coroutine functions, partials of them and objects with an async ``__call__``."""
    while hasattr(func, "func") and not inspect.isfunction(func):  # functools.partial
        func = func.func
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - we need the attribute itself
    return call is not None and inspect.iscoroutinefunction(call)


def _collect_params(
    func_name: str, sig: inspect.Signature, docs: Mapping[str, str]
) -> tuple[tuple[Param, ...], str | None]:
    params: list[Param] = []
    ctx_param: str | None = None
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise SchemaError(
                f"function '{func_name}': parameter '{star}{p.name}' has no schema; "
                "name each argument, or build the tool with an explicit parameters= JSON Schema"
            )
        if _is_ctx(p.name, p.annotation):
            ctx_param = p.name
            continue
        annotation: object = Any if p.annotation is EMPTY else p.annotation
        default, info = p.default, None
        if isinstance(default, FieldInfo):  # `param: int = Field(1, ge=1)`
            info = default
            default = EMPTY if info.is_required() else _field_default(info)
        params.append(
            Param(
                name=p.name,
                annotation=annotation,
                default=default,
                positional_only=p.kind is p.POSITIONAL_ONLY,
                description=(info.description if info else None) or docs.get(p.name),
                field_info=info,
            )
        )
    return tuple(params), ctx_param


def _field_default(info: FieldInfo) -> object:
    if info.default_factory is not None:
        made: object = info.default_factory()  # type: ignore[call-arg]
        return made
    return EMPTY if info.default is PydanticUndefined else info.default


def _parameters_schema(
    func_name: str, params: tuple[Param, ...]
) -> tuple[JsonObject, type[BaseModel] | None]:
    properties: JsonObject = {}
    for param in params:
        prop = fast_schema(param.annotation)
        if prop is None or param.field_info is not None or not _plain_default(param.default):
            return _pydantic_schema(func_name, params)
        if not param.required:
            prop["default"] = cast(JsonValue, param.default)  # a plain scalar (_plain_default)
        if param.description:
            prop["description"] = param.description
        properties[param.name] = prop
    return _object_schema(properties, [p.name for p in params if p.required]), None


def _object_schema(properties: JsonObject, required: list[str]) -> JsonObject:
    schema: JsonObject = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list[JsonValue](required)
    return schema


def _plain_default(default: object) -> bool:
    return default is EMPTY or type(default) in _JSON_SCALARS


def fast_schema(tp: object) -> JsonObject | None:
    """JSON Schema of a common type, equal to pydantic's; ``None`` when pydantic must decide."""
    if tp is Any:
        return {}
    if isinstance(tp, type | None) and tp in _PRIMITIVES:
        return dict(_PRIMITIVES[tp])
    if tp is list:
        return {"type": "array", "items": {}}
    if tp is dict:
        return {"type": "object", "additionalProperties": True}
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is list and len(args) == 1:
        items = fast_schema(args[0])
        return None if items is None else {"type": "array", "items": items}
    if origin is dict and len(args) == 2 and args[0] is str:
        values = fast_schema(args[1])
        return None if values is None else {"type": "object", "additionalProperties": values}
    if origin is Union or origin is types.UnionType:
        members: list[JsonValue] = []
        for arg in args:
            member = fast_schema(arg)
            if member is None:
                return None
            members.append(member)
        return {"anyOf": members}
    if origin is Literal:
        return _literal_schema(args)
    return None


def _literal_schema(values: tuple[JsonValue, ...]) -> JsonObject | None:
    kinds = {type(v) for v in values}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind not in (str, int, bool):
        return None
    type_name = _PRIMITIVES[kind]["type"]
    if len(values) == 1:
        return {"const": values[0], "type": type_name}
    return {"enum": list[JsonValue](values), "type": type_name}


def _build_model(func_name: str, params: tuple[Param, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {}  # pydantic's create_model takes any type form
    for index, param in enumerate(params):
        default = ... if param.required else param.default
        alias = Field(alias=param.name, description=param.description) if param.description \
            else Field(alias=param.name)
        field_info = FieldInfo.merge_field_infos(param.field_info or FieldInfo.from_field(default), alias)
        fields[f"p{index}"] = (param.annotation, field_info)
    model: type[BaseModel] = create_model(
        f"{func_name}_arguments",
        __config__=ConfigDict(extra="forbid", populate_by_name=False, arbitrary_types_allowed=False),
        **fields,
    )
    return model


def _pydantic_schema(
    func_name: str, params: tuple[Param, ...]
) -> tuple[JsonObject, type[BaseModel]]:
    try:
        model = _build_model(func_name, params)
        schema = model.model_json_schema(by_alias=True)
    except Exception as exc:
        culprit = _find_bad_param(params)
        where = f"parameter '{culprit}'" if culprit else "a parameter"
        raise SchemaError(
            f"function '{func_name}': {where} has a type that cannot be expressed as JSON Schema "
            f"({type(exc).__name__}: {str(exc).splitlines()[0]}); use JSON-compatible types "
            "(str, int, float, bool, lists, dicts, pydantic models, dataclasses, TypedDicts)"
        ) from exc
    stripped = strip_titles(schema)
    found, required = stripped.get("properties"), stripped.get("required")
    ordered = _object_schema(found if isinstance(found, dict) else {},
                             [str(r) for r in required] if isinstance(required, list) else [])
    if "$defs" in stripped:
        ordered["$defs"] = stripped["$defs"]
    return ordered, model


def _find_bad_param(params: tuple[Param, ...]) -> str | None:
    for param in params:
        try:
            TypeAdapter(cast("type[object]", param.annotation)).json_schema()
        except Exception:
            return param.name
    return None


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then",
               "else", "unevaluatedProperties", "unevaluatedItems")


def strip_titles(schema: JsonObject) -> JsonObject:
    """A copy of a JSON Schema without ``title`` keywords (property names are kept)."""
    out: JsonObject = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _stripped(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_stripped(sub) for sub in value]
        elif key in _SCHEMA_ONE:
            out[key] = _stripped(value)
        else:
            out[key] = value
    return out


def _stripped(schema: JsonValue) -> JsonValue:
    return strip_titles(schema) if isinstance(schema, dict) else schema

