"""Tool names and namespaces: snake_case names, ``namespace-method`` qualified names."""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["NameSeparator", "normalize_tool_name", "qualify", "split_qualified"]

NameSeparator = Literal["-", "."]

_OPENAPI_DUP = re.compile(r"^([a-zA-Z0-9]+)_\1_([a-zA-Z0-9]+)$")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])")


def normalize_tool_name(name: str) -> str:
    """Normalize a name to snake_case without dots, dashes or spaces.

    ``getUserIDFromDB`` → ``get_user_id_from_db``; ``math.ops`` → ``math_ops``; the OpenAPI
    duplicate form ``add_add_get`` → ``add_get``.
    """
    match = _OPENAPI_DUP.match(name)
    if match:
        return f"{match.group(1)}_{match.group(2)}"
    name = re.sub(r"[.\-@/:]+", "_", name)
    name = "_".join(name.split())
    name = _CAMEL.sub("_", name).lower()
    return re.sub(r"_+", "_", name)


def qualify(namespace: str, method_name: str, sep: NameSeparator = "-") -> str:
    """Join a namespace and a method name: ``math_ops-multiply``."""
    return f"{namespace}{sep}{method_name}"


def split_qualified(name: str) -> tuple[str | None, str]:
    """Split ``ns-method`` or ``ns.method`` at the first separator; ``(None, name)`` if none."""
    for index, char in enumerate(name):
        if char in "-.":
            return name[:index], name[index + 1 :]
    return None, name
