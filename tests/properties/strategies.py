"""Hypothesis strategies: parameter types, values of those types, and whole signatures."""

from __future__ import annotations

import inspect
import keyword
import string
import types
from typing import Any, Literal, Union, get_args, get_origin

from hypothesis import strategies as st

SCALARS = st.sampled_from([str, int, float, bool])
_WORD = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6)
LITERALS = st.lists(_WORD, min_size=1, max_size=3, unique=True).map(
    lambda values: Literal[tuple(values)]
)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        children.map(lambda t: list[t]),  # type: ignore[valid-type]
        children.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        children.map(lambda t: Union[t, None]),  # noqa: UP007
    )


TYPES = st.recursive(SCALARS | LITERALS, _extend, max_leaves=4)


def values_of(tp: Any) -> st.SearchStrategy[Any]:
    """JSON-representable values of a generated type (no NaN or infinities)."""
    if tp is str:
        return st.text(max_size=8)
    if tp is int:
        return st.integers(-(2**31), 2**31)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if tp is bool:
        return st.booleans()
    if tp is type(None):
        return st.none()
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(values_of(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(_WORD, values_of(args[1]), max_size=3)
    if origin is Union or origin is types.UnionType:
        return st.one_of(*(values_of(a) for a in args))
    raise AssertionError(f"no strategy for {tp!r}")


NAMES = _WORD.filter(lambda n: not keyword.iskeyword(n) and n != "ctx")


@st.composite
def signatures(draw: st.DrawFn) -> tuple[inspect.Signature, dict[str, Any]]:
    """A signature of 0-5 typed parameters (some with defaults) and one valid call's arguments."""
    names = draw(st.lists(NAMES, max_size=5, unique=True))
    params = []
    call: dict[str, Any] = {}
    seen_default = False
    for name in names:
        tp = draw(TYPES)
        has_default = seen_default or draw(st.booleans())
        default: object = inspect.Parameter.empty
        if has_default:
            seen_default = True
            default = draw(values_of(tp).filter(lambda v: isinstance(v, str | int | float | bool)
                                                or v is None))  if draw(st.booleans()) else None
            if default is None and type(None) not in get_args(tp):
                tp = Union[tp, None]  # noqa: UP007
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=default, annotation=tp))
        if default is inspect.Parameter.empty or draw(st.booleans()):
            call[name] = draw(values_of(tp))
    return inspect.Signature(params), call


def make_function(name: str, signature: inspect.Signature) -> Any:
    def function(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    function.__name__ = name
    function.__qualname__ = name
    function.__signature__ = signature  # type: ignore[attr-defined]
    function.__doc__ = "A generated tool."
    return function
