"""The door as the catalog reaches it: what a catalog asks of a door (``Door``), and the door
it builds for itself when it is given none (``door_for``).

The door (``ToolInvoker``) is a floor above the catalog and imports it; the catalog never imports
the door. It finds the door's class through the entry point the package declares in its
metadata — group ``toolkeeper.doors``, name ``default`` — loaded the first time a catalog runs
calls without a door of its own, the way a plugin is found: nothing registers anything at import
time, and the import graph stays free of cycles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Protocol, cast

from ..core.call import ToolCall
from ..core.json import JsonObject
from ..core.results import ToolResult
from ..errors import UsageError

if TYPE_CHECKING:
    from ..invoke.session import InvokerSession
    from .catalog import CatalogBase

__all__ = ["DOORS", "Door", "door_for"]

DOORS = "toolkeeper.doors"
"""The entry-point group naming the door a catalog builds (``default``)."""
_OWN = "toolkeeper"


class Door(Protocol):
    """What runs a catalog's calls: ``ToolInvoker`` meets it."""

    def execute_tool_calls(
        self, calls: Sequence[ToolCall] | object, api_format: str | None = None, *,
        session: InvokerSession | None = None, catalog: CatalogBase | None = None,
    ) -> list[ToolResult] | list[JsonObject]: ...


def door_for(catalog: CatalogBase) -> Door:
    """The door the package declares, built over ``catalog`` with its defaults (no approval
    handler: SAFE and SENSITIVE calls run, HIGH and CRITICAL ones are denied).

    Raises:
        UsageError: the package's metadata (its entry points) is not installed.
    """
    return _door_type()(catalog)


@cache
def _door_type() -> Callable[[CatalogBase], Door]:
    found: list[EntryPoint] = list(entry_points(group=DOORS, name="default"))
    if not found:
        raise UsageError(
            "this catalog has no door to run calls through: toolkeeper's metadata (its "
            f"'{DOORS}' entry point) is not installed — install the package (pip install "
            "toolkeeper), or pass invoker=ToolInvoker(catalog)")
    own = [e for e in found if e.dist is not None and e.dist.name == _OWN]
    return cast("Callable[[CatalogBase], Door]", (own or found)[0].load())
