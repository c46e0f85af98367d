"""``calculator``: arithmetic with simpleeval — no ``eval``, no attribute access, bounded powers."""

from __future__ import annotations

import math

from ..core.metadata import ToolMetadata
from ..core.risk import ToolRisk
from ..errors import InvalidArgumentsError
from ..extras import missing
from ..tools.tool import Tool

__all__ = ["calculator_tool"]

_FUNCTIONS = {name: getattr(math, name) for name in (
    "sqrt", "log", "log10", "log2", "exp", "sin", "cos", "tan", "asin", "acos", "atan", "floor",
    "ceil", "fabs", "factorial", "gcd", "radians", "degrees", "hypot")}
_FUNCTIONS.update({"abs": abs, "round": round, "min": min, "max": max, "sum": sum})
_NAMES = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf}


def calculator_tool() -> Tool:
    """The ``calculator`` tool."""

    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression, e.g. "sqrt(2) * (3 + 4) ** 2 / 7".

        Args:
            expression: Numbers, + - * / // % **, parentheses, and math functions (sqrt, log,
                sin, cos, floor, factorial, min, max, round...) and constants (pi, e).
        """
        if len(expression) > 1000:
            raise InvalidArgumentsError("the expression is longer than 1000 characters",
                                        tool_name="calculator")
        try:
            from simpleeval import EvalWithCompoundTypes, InvalidExpression, NumberTooHigh
        except ImportError as exc:
            raise missing("builtins", "the calculator tool") from exc
        evaluator = EvalWithCompoundTypes(functions=_FUNCTIONS, names=_NAMES)
        try:
            value = evaluator.eval(expression)
        except (InvalidExpression, NumberTooHigh, SyntaxError, ZeroDivisionError, ValueError,
                TypeError, OverflowError) as exc:
            raise InvalidArgumentsError(f"cannot evaluate {expression!r}: "
                                        f"{type(exc).__name__}: {exc}",
                                        tool_name="calculator") from exc
        if not isinstance(value, int | float):
            raise InvalidArgumentsError(f"{expression!r} does not evaluate to a number",
                                        tool_name="calculator")
        return repr(value)

    return Tool.from_function(calculator, risk=ToolRisk.SAFE, metadata=ToolMetadata(
        read_only_hint=True, idempotent_hint=True, category="data", inline=True))
