"""What an approval card shows for a tool, declared as data: your own tools get a view of
their arguments without writing HTML.

A card view is a function of the call's arguments that returns sections — a text block with
a title, a diff, a URL, key/value rows — which the page renders (numbered, wrapped, every
value escaped, odd characters flagged where they are)::

    from toolkeeper.server.cards import DiffSection, RowsSection, card_view

    @card_view("update_config")
    def _(arguments):
        return [RowsSection(title="target", rows=[("service", arguments["service"])]),
                DiffSection(title="config.yaml", old=load_current(), new=arguments["yaml"])]

Sections may also be plain dicts (``{"kind": "text", "title": …, "text": …}``). A view
answers by the tool's name as called. It runs in a worker thread each time the card is
drawn, so keep it quick. A view that raises or returns something else gives the generic
view with a note saying so. Below a declared view the card also keeps every argument as sent
(folded), since a view may leave some out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = ["CardView", "DiffSection", "RowsSection", "Section", "TextSection", "UrlSection",
           "card_view", "find_card_view", "register_card_view", "sections_of"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class TextSection(BaseModel):
    """A text shown with line numbers (a script, a message, a query); ``marked`` points at one
    of its lines (counted from 1)."""

    model_config = _FROZEN
    kind: Literal["text"] = "text"
    title: str
    text: str
    note: str = ""
    marked: int | None = None


class DiffSection(BaseModel):
    """``new`` against ``old``; ``old=None`` shows every line of ``new`` as added."""

    model_config = _FROZEN
    kind: Literal["diff"] = "diff"
    title: str
    old: str | None
    new: str
    note: str = ""


class UrlSection(BaseModel):
    """A request: its method and URL, the host emphasised (parsed as ``httpx`` parses it)."""

    model_config = _FROZEN
    kind: Literal["url"] = "url"
    title: str = "request"
    url: str
    method: str = ""
    note: str = ""


class RowsSection(BaseModel):
    """Key/value rows; a value that is not a string is shown as JSON."""

    model_config = _FROZEN
    kind: Literal["rows"] = "rows"
    title: str
    rows: list[tuple[str, str | int | float | bool | None]]
    note: str = ""


Section: TypeAlias = Annotated[TextSection | DiffSection | UrlSection | RowsSection,
                               Field(discriminator="kind")]
CardView: TypeAlias = Callable[[dict[str, Any]], Iterable["Section | Mapping[str, Any]"]]
_SECTIONS: TypeAdapter[list[Section]] = TypeAdapter(list[Section])
_VIEWS: dict[str, CardView] = {}


def register_card_view(tool_name: str, view: CardView | None) -> None:
    """Show calls of ``tool_name`` with ``view`` (``None`` removes it)."""
    if view is None:
        _VIEWS.pop(tool_name, None)
    else:
        _VIEWS[tool_name] = view


def card_view(tool_name: str) -> Callable[[CardView], CardView]:
    """Decorator form of ``register_card_view``; returns the function unchanged."""
    def register(view: CardView) -> CardView:
        register_card_view(tool_name, view)
        return view
    return register


def find_card_view(tool_name: str) -> CardView | None:
    """The view registered for ``tool_name``, if any."""
    return _VIEWS.get(tool_name)


def sections_of(produced: Iterable[Section | Mapping[str, Any]]) -> list[Section]:
    """A view's answer checked and made into sections.

    Raises:
        pydantic.ValidationError: an item is not a section.
        TypeError: the answer is not iterable (a string counts as not).
    """
    if isinstance(produced, str | bytes | Mapping):
        raise TypeError("a card view returns a list of sections, not a single value")
    return _SECTIONS.validate_python(list(produced))
