"""Argument validation with one semantics for function tools (pydantic) and raw schemas.

Unknown arguments are rejected unless the tool opts into ignoring them; obviously-meant scalars
are coerced ("5" → 5); every problem is reported with its field path, what was expected and
what was received.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, NoReturn, Protocol

import jsonschema_rs
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..core.json import JsonObject
from ..errors import InvalidArgumentsError, SchemaError
from .rawschema import accepts_null, coerce_arguments, drop_optional_nulls
from .signature import FunctionInfo

__all__ = ["ArgumentProblem", "ArgumentValidator", "FunctionArgumentValidator",
           "ModelArgumentValidator", "SchemaArgumentValidator"]

THINK_FIELD = "toolcall_reason"
ArgumentProblem = dict[str, object]
"""One thing wrong with a call's arguments: its ``path``, a ``message`` for the model and what
was ``received``."""
Kind = jsonschema_rs.ValidationErrorKind
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean", "null"})


def _scalar(schema: object) -> bool:
    """Whether a property schema admits only scalars (a plain ``type`` of string, number…)."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        return all(isinstance(k, str) and k in _SCALAR_TYPES for k in kind)
    return isinstance(kind, str) and kind in _SCALAR_TYPES


_MAX_SHOWN = 5


class ArgumentValidator(Protocol):
    """Turns a model's arguments into the keyword arguments of a call, or raises."""

    def __call__(self, arguments: Mapping[str, object]) -> dict[str, object]: ...


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _path(parts: Iterable[object]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(arguments)"


def _type_hint(schema: Mapping[str, object], name: str) -> str:
    props = schema.get("properties")
    prop = props.get(name) if isinstance(props, dict) else None
    if not isinstance(prop, dict):
        return ""
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    return f" ({kind})" if isinstance(kind, str) else ""


def _raise(tool_name: str, problems: list[ArgumentProblem]) -> NoReturn:
    shown = "; ".join(str(p["message"]) for p in problems[:_MAX_SHOWN])
    more = len(problems) - _MAX_SHOWN
    tail = f"; and {more} more" if more > 0 else ""
    raise InvalidArgumentsError(
        f"invalid arguments for tool '{tool_name}': {shown}{tail}. "
        "Fix the arguments and call the tool again.",
        tool_name=tool_name,
        details={"problems": problems},
    )


def _split_unknown(
    arguments: Mapping[str, object], known: set[str], unknown: Literal["reject", "ignore"],
) -> tuple[dict[str, object], list[ArgumentProblem]]:
    """Arguments the schema declares, and a problem for each one it does not (unless ignored)."""
    args = {k: v for k, v in arguments.items() if k in known}
    extra = [k for k in arguments if k not in known and k != THINK_FIELD]
    if not extra or unknown == "ignore":
        return args, []
    takes = ", ".join(sorted(known)) or "no arguments"
    return args, [
        {"path": k, "message": f"unknown argument '{k}' (this tool takes: {takes})", "received": k}
        for k in extra
    ]


def _check_mapping(tool_name: str, arguments: object) -> None:
    if not isinstance(arguments, Mapping):
        _raise(tool_name, [{
            "path": "(arguments)",
            "message": f"arguments must be a JSON object, got {type(arguments).__name__}",
            "received": _short(arguments),
        }])


class FunctionArgumentValidator:
    """Validates with the pydantic model built from the function's signature."""

    def __init__(
        self, tool_name: str, info: FunctionInfo, unknown: Literal["reject", "ignore"] = "reject"
    ) -> None:
        self._tool = tool_name
        self._info = info
        self._unknown = unknown
        self._known = {p.name for p in info.params}
        self._fields = [(f"p{i}", p.name) for i, p in enumerate(info.params)]
        found, listed = info.parameters.get("properties"), info.parameters.get("required")
        props: JsonObject = found if isinstance(found, dict) else {}
        required = set(listed) if isinstance(listed, list) else set()
        # Whether dropping optional nulls can ever change a call: some optional property cannot
        # be null, or some property may hold an object (whose own properties might).
        self._may_drop = any(
            (name not in required and not accepts_null(sub)) or not _scalar(sub)
            for name, sub in props.items())

    def __call__(self, arguments: Mapping[str, object]) -> dict[str, object]:
        problems: list[ArgumentProblem]
        args: Mapping[str, object]
        if type(arguments) is dict and arguments.keys() <= self._known:
            args, problems = arguments, []  # the common case: a plain dict of known names
        else:
            _check_mapping(self._tool, arguments)
            args, problems = _split_unknown(arguments, self._known, self._unknown)
        if self._may_drop:
            args = drop_optional_nulls(args, self._info.parameters)
        try:
            # model_validate's own work, without its wrapper (the hot path)
            model = self._info.args_model.__pydantic_validator__.validate_python(args)
        except ValidationError as exc:
            problems += [self._problem(e) for e in exc.errors(include_url=False)]
        if problems:
            _raise(self._tool, problems)
        return {name: getattr(model, attr) for attr, name in self._fields}

    def _problem(self, error: ErrorDetails) -> ArgumentProblem:
        path = _path(error["loc"])
        kind = error["type"]
        if kind == "missing":
            hint = _type_hint(self._info.parameters, path)
            message = f"missing required argument '{path}'{hint}"
        elif kind == "extra_forbidden":
            message = f"unknown field '{path}'"
        else:
            msg = str(error["msg"]).replace("Input should be", "must be")
            message = f"argument '{path}' {msg[0].lower() + msg[1:]}, got {_short(error['input'])}"
        return {"path": path, "message": message, "received": _short(error.get("input"))}


def _outside_refs(schema: object) -> list[str]:
    """The ``$ref``s of ``schema`` that do not point inside it (``#…``), in document order."""
    found: list[str] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                found.append(ref)
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return found


class SchemaArgumentValidator:
    """Validates against a raw JSON Schema with jsonschema-rs, after lax coercion."""

    def __init__(
        self, tool_name: str, schema: Mapping[str, object],
        unknown: Literal["reject", "ignore"] = "reject",
    ) -> None:
        self._tool = tool_name
        self._schema = dict(schema)
        extra = schema.get("additionalProperties")
        self._open = extra is True or isinstance(extra, dict)
        self._unknown = unknown
        props = schema.get("properties")
        self._known = set(props) if isinstance(props, dict) else set()
        try:  # offline: a $ref is resolved inside the schema, never fetched (network, files)
            self._validator = jsonschema_rs.validator_for(self._schema, offline=True)
        except Exception as exc:
            outside = _outside_refs(self._schema)
            if outside:
                raise SchemaError(
                    f"tool '{tool_name}': its parameters refer to {outside[0]!r} ($ref), "
                    "outside the schema; toolkeeper never fetches a schema reference (network "
                    "or files): put the definition in the schema's $defs and refer to it as "
                    "'#/$defs/NAME'") from None
            raise SchemaError(f"tool '{tool_name}': parameters are not a valid JSON Schema: {exc}") from exc

    def __call__(self, arguments: Mapping[str, object]) -> dict[str, object]:
        _check_mapping(self._tool, arguments)
        problems: list[ArgumentProblem] = []
        if self._open:
            args = {k: v for k, v in arguments.items() if k != THINK_FIELD or k in self._known}
        else:
            args, problems = _split_unknown(arguments, self._known, self._unknown)
        args = coerce_arguments(drop_optional_nulls(args, self._schema), self._schema)
        if not self._validator.is_valid(args):
            problems += [self._problem(e) for e in self._validator.iter_errors(args)]
        if problems:
            _raise(self._tool, problems)
        return args

    def _problem(self, error: jsonschema_rs.ValidationError) -> ArgumentProblem:
        kind = error.kind
        path_parts: list[object] = list(error.instance_path)
        if isinstance(kind, Kind.Required):
            path = _path([*path_parts, kind.property])
            hint = _type_hint(self._schema, path) if not path_parts else ""
            return {"path": path, "message": f"missing required argument '{path}'{hint}",
                    "received": None}
        path = _path(path_parts)
        got = _short(error.instance)
        if isinstance(kind, Kind.Type):
            types = " or ".join(str(t) for t in kind.types)
            article = "an" if types[:1] in "aeiou" else "a"
            message = f"argument '{path}' must be {article} {types}, got {got}"
        elif isinstance(kind, Kind.Enum):
            options = ", ".join(_short(o) for o in kind.options)
            message = f"argument '{path}' must be one of {options}, got {got}"
        elif isinstance(kind, Kind.AdditionalProperties):
            message = f"unknown field(s) {', '.join(map(repr, kind.unexpected))} in '{path}'"
        else:
            message = f"argument '{path}': {error.message}"
        return {"path": path, "message": message, "received": got}


class ModelArgumentValidator:
    """Validation through a user-supplied pydantic model (``Tool(parameters_model=...)``)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self._model = model

    def __call__(self, arguments: Mapping[str, object]) -> dict[str, object]:
        try:
            instance = self._model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise InvalidArgumentsError(str(exc)) from exc
        return {name: getattr(instance, name) for name in type(instance).model_fields}
