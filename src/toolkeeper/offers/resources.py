"""What ``toolkeeper serve`` offers as MCP resources: the resources and templates a tools
module declares with ``@resource``, the skills' files, and the artifacts a client's own calls
stored — each client sees and reads only its own (``toolkeeper://artifact/sha256:…``).

Plain data in, plain MCP data out: the server turns it into the SDK's types."""

from __future__ import annotations

import base64
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.store import BlobStore, UnknownArtifactError
from ..errors import UsageError
from ..skills.skill import Skill

__all__ = ["ARTIFACT_PREFIX", "Completions", "Resource", "ResourceNotFound", "Resources",
           "artifact_link", "complete_from", "resource"]

ARTIFACT_PREFIX = "toolkeeper://artifact/"
SKILL_PREFIX = "toolkeeper://skill/"
Completions = Mapping[str, Sequence[str] | Callable[[str], Iterable[str]]]
"""Argument name → its values, or a function of what was typed so far giving them."""
KNOWN_ARTIFACTS = 10_000
"""Listing entries of artifacts kept (the oldest forgotten first: then read from the store)."""
_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ResourceNotFound(LookupError):
    """No resource with that URI, or not one this client may read."""


@dataclass(frozen=True, kw_only=True)
class Resource:
    """A resource (or, when ``uri`` has ``{name}`` parts, a resource template) a tools module
    offers: ``read`` gets the template's parameters and returns ``str`` (text) or ``bytes``."""

    uri: str
    read: Callable[..., Any]
    name: str
    description: str = ""
    mime_type: str | None = None
    completions: Completions = field(default_factory=dict)

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(_PARAM.findall(self.uri))

    def match(self, uri: str) -> dict[str, str] | None:
        """The template's parameters in ``uri``, or None when ``uri`` is not one of its."""
        if not self.parameters:
            return {} if uri == self.uri else None
        pattern = "".join(f"(?P<{part}>[^/]+)" if i % 2 else re.escape(part)
                          for i, part in enumerate(_PARAM.split(self.uri)))
        found = re.fullmatch(pattern, uri)
        return found.groupdict() if found else None

    def listing(self) -> dict[str, Any]:
        key = "uriTemplate" if self.parameters else "uri"
        entry = {key: self.uri, "name": self.name, "description": self.description or None,
                 "mimeType": self.mime_type}
        return {k: v for k, v in entry.items() if v is not None}


def resource(uri: str, *, name: str | None = None, description: str | None = None,
             mime_type: str | None = None, completions: Completions | None = None
             ) -> Callable[[Callable[..., Any]], Resource]:
    """Declare a function as an MCP resource at ``uri``; with ``{name}`` parts in the URI, a
    resource template whose parts are the function's arguments. It returns text (``str``) or
    bytes (sent base64); ``completions`` offers values for the template's parts."""
    def wrap(fn: Callable[..., Any]) -> Resource:
        declared = Resource(uri=uri, read=fn, name=name or fn.__name__,
                            description=description or inspect.getdoc(fn) or "",
                            mime_type=mime_type, completions=completions or {})
        missing = set(declared.parameters) - set(inspect.signature(fn).parameters)
        if missing:
            raise UsageError(f"resource {uri!r}: {fn.__name__}() has no parameter "
                             f"{sorted(missing)[0]!r}; name each {{part}} of the URI as an "
                             "argument")
        return declared
    return wrap


def complete_from(completions: Completions, argument: str, typed: str) -> list[str]:
    """The values offered for ``argument`` that start with what was ``typed`` (at most 100)."""
    source = completions.get(argument)
    if source is None:
        return []
    values = source(typed) if callable(source) else [v for v in source if v.startswith(typed)]
    return [str(v) for v in values][:100]


class Resources:
    """The resources one server offers, each client's artifacts among them."""

    def __init__(self, declared: Sequence[Resource] = (), *, skills: Sequence[Skill] = (),
                 store: BlobStore | None = None) -> None:
        self.fixed = [r for r in declared if not r.parameters]
        self.templates = [r for r in declared if r.parameters]
        self.skills = {s.name: s for s in skills}
        self.store = store
        self._known: dict[str, dict[str, Any]] = {}
        """Artifacts' listing entries by ref (name, mimeType, size): a listing reads no blob
        twice, and none a call of this server stored (``remember``)."""

    def remember(self, ref: str, *, name: str, mime_type: str, size: int | None) -> None:
        """What a call stored, as ``resources/list`` shows it (without reading it back)."""
        self._known.pop(ref, None)
        self._known[ref] = {"name": name, "mimeType": mime_type, "size": size}
        if len(self._known) > KNOWN_ARTIFACTS:
            del self._known[next(iter(self._known))]  # the oldest

    def _described(self, ref: str) -> dict[str, Any] | None:
        known = self._known.get(ref)
        if known is None and self.store is not None:
            blob = self.store.stat(ref)
            if blob is not None:
                self.remember(ref, name=blob.name or ref, mime_type=blob.media_type,
                              size=blob.size)
                known = self._known[ref]
        return known

    def listing(self, artifacts: Sequence[str]) -> list[dict[str, Any]]:
        """``resources/list``: the declared resources, the skills, this client's artifacts."""
        out = [r.listing() for r in self.fixed]
        out += [{"uri": SKILL_PREFIX + s.name, "name": f"skill {s.name}",
                 "description": s.description or None, "mimeType": "text/markdown"}
                for s in self.skills.values()]
        for ref in artifacts:
            known = self._described(ref)
            if known is not None:
                out.append({"uri": ARTIFACT_PREFIX + ref, **known})
        return [{k: v for k, v in entry.items() if v is not None} for entry in out]

    def template_listing(self) -> list[dict[str, Any]]:
        return [t.listing() for t in self.templates]

    async def read(self, uri: str, artifacts: Sequence[str]) -> dict[str, Any]:
        """``resources/read``'s one content: ``text`` or ``blob``, with its MIME type."""
        if uri.startswith(ARTIFACT_PREFIX):
            ref = uri.removeprefix(ARTIFACT_PREFIX)
            if ref not in artifacts or self.store is None:  # another client's is not there
                raise ResourceNotFound(uri)
            try:
                blob = self.store.resolve(ref)
            except UnknownArtifactError as exc:  # removed by the store's gc meanwhile
                raise ResourceNotFound(uri) from exc
            return _content(uri, _text_if_text(blob.data, blob.media_type), blob.media_type)
        if uri.startswith(SKILL_PREFIX) and uri.removeprefix(SKILL_PREFIX) in self.skills:
            skill = self.skills[uri.removeprefix(SKILL_PREFIX)]
            text = Path(skill.path).read_text() if skill.path else skill.instructions
            return _content(uri, text, "text/markdown")
        for declared in [*self.fixed, *self.templates]:
            parameters = declared.match(uri)
            if parameters is not None:
                value = declared.read(**parameters)
                if inspect.isawaitable(value):
                    value = await value
                return _content(uri, value, declared.mime_type)
        raise ResourceNotFound(uri)

    def complete(self, uri_template: str, argument: str, typed: str) -> list[str]:
        for template in self.templates:
            if template.uri == uri_template:
                return complete_from(template.completions, argument, typed)
        return []


def artifact_link(tool: str, ref: str, size: int | None) -> dict[str, Any]:
    """The MCP ``resource_link`` to a call's offloaded result: ``resources/read`` of its URI
    gives the whole text to the client whose call stored it."""
    link = {"type": "resource_link", "uri": ARTIFACT_PREFIX + ref, "name": f"{tool} result",
            "mimeType": "text/plain", "size": size}
    return {k: v for k, v in link.items() if v is not None}


def _text_if_text(data: bytes, media_type: str) -> str | bytes:
    """A ``text/*`` artifact as text (what the tool returned), anything else as bytes."""
    if media_type.startswith("text/"):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data
    return data


def _content(uri: str, value: Any, mime_type: str | None) -> dict[str, Any]:
    if isinstance(value, bytes):
        return {"uri": uri, "mimeType": mime_type or "application/octet-stream",
                "blob": base64.b64encode(value).decode("ascii")}
    return {"uri": uri, "mimeType": mime_type or "text/plain", "text": str(value)}
