"""An upstream's resources and prompts, namespaced like its tools and pinned like its tools, as
sources our MCP server serves beside its own.

- A resource ``URI`` of server ``up`` is served as ``toolkeeper://mcp/up/URI`` (a template's
  ``uriTemplate`` the same way), so two upstreams never collide and a read names its upstream.
- A prompt ``greet`` of server ``up`` is served as ``up-greet``.
- A prompt's and a resource template's declaration is pinned (keys ``prompt:up-greet``,
  ``template:up-logs``) exactly like a tool's: one that changed since it was trusted is held —
  not listed, not served — until ``toolkeeper tools trust prompt:up-greet``; the model never
  reads the new text. (A resource's content changes by nature and is not pinned.)

Our server consumes these through the ``ResourceSource`` / ``PromptSource`` /
``CompletionSource`` protocols; a source raises ``NotServed`` (with the JSON-RPC code to answer)
for a name or URI it does not serve, and ``UpstreamError`` when the upstream fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..tools.naming import qualify
from .pins import PREFIXES, Kind, SqlitePins
from .relay import RelayLink
from .upstream import Upstream, UpstreamError

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["RESOURCE_PREFIX", "CompletionSource", "NotServed", "PromptSource",
           "ResourceSource", "UpstreamSources", "resource_server", "served_uri"]

RESOURCE_PREFIX = "toolkeeper://mcp/"
RESOURCE_NOT_FOUND = -32002
"""MCP's code for a resource that is not there (the 2025 revisions'; the SDK names none):
``toolkeeper.mcp.wire`` answers with this one. The gateway is loaded by commands that never
load the SDK, so the codes the SDK names are read from it where they are used."""


class NotServed(Exception):
    """A name or URI this source does not serve (or holds); ``code`` is the JSON-RPC error."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class ResourceSource(Protocol):
    """Resources our server serves from elsewhere (the gateway's upstreams)."""

    async def list_resources(self) -> list[types.Resource]: ...

    async def list_resource_templates(self) -> list[types.ResourceTemplate]: ...

    def serves_resource(self, uri: str) -> bool: ...

    async def read_resource(self, uri: str) -> types.ReadResourceResult: ...

    async def subscribe(self, uri: str, link: RelayLink) -> None: ...

    async def unsubscribe(self, uri: str, link: RelayLink) -> None: ...


class PromptSource(Protocol):
    async def list_prompts(self) -> list[types.Prompt]: ...

    def serves_prompt(self, name: str) -> bool: ...

    def prompt_server(self, name: str) -> str:
        """The upstream that serves the prompt ``name`` (empty: none)."""
        ...

    async def get_prompt(self, name: str, arguments: dict[str, str] | None
                         ) -> types.GetPromptResult: ...


class CompletionSource(Protocol):
    async def complete(self, ref: types.PromptReference | types.ResourceTemplateReference,
                       argument: types.CompletionArgument,
                       context: types.CompletionContext | None) -> types.Completion | None:
        """Completions for an argument of a prompt or template it serves, else None."""
        ...


def served_uri(server: str, uri: str) -> str:
    """How an upstream's resource URI (or URI template) is served."""
    return f"{RESOURCE_PREFIX}{server}/{uri}"


def resource_server(uri: str) -> str:
    """The upstream a served URI names (empty for a URI the gateway does not serve)."""
    split = _split(uri)
    return split[0] if split is not None else ""


def _split(uri: str) -> tuple[str, str] | None:
    """(server, upstream URI) of a served URI, or None."""
    if not uri.startswith(RESOURCE_PREFIX):
        return None
    server, _, rest = uri[len(RESOURCE_PREFIX):].partition("/")
    return (server, rest) if server and rest else None


@dataclass
class _Listed:
    """What one upstream lists now, namespaced, with what is held and why."""

    resources: list[types.Resource] = field(default_factory=list)
    templates: list[types.ResourceTemplate] = field(default_factory=list)
    held_templates: dict[str, str] = field(default_factory=dict)  # upstream uriTemplate → why
    prompts: dict[str, tuple[types.Prompt, str]] = field(default_factory=dict)  # served → (, remote)
    held_prompts: dict[str, str] = field(default_factory=dict)  # served name → why


class UpstreamSources:
    """The resources and prompts of the gateway's upstreams (``ResourceSource``,
    ``PromptSource`` and ``CompletionSource`` at once)."""

    def __init__(self, upstreams: dict[str, Upstream], *, pins: SqlitePins | None,
                 note: Callable[[str], None]) -> None:
        self._upstreams = upstreams
        self._pins = pins
        self._note = note
        self._listed: dict[str, _Listed] = {}
        self._subscribed: dict[str, dict[str, RelayLink]] = {}  # served URI → client → link

    # -- listing -------------------------------------------------------------------------
    async def refresh(self, server: str, what: str = "both") -> bool:
        """List ``server``'s resources and/or prompts again (bounded); True when what is
        served changed. An upstream that fails keeps what was listed before."""
        upstream = self._upstreams[server]
        listed = self._listed.setdefault(server, _Listed())
        before = self._shown(listed, what)
        try:
            if what in ("both", "resources") and upstream.config.resources:
                await self._list_resources(upstream, listed)
            if what in ("both", "prompts") and upstream.config.prompts:
                await self._list_prompts(upstream, listed)
        except UpstreamError as exc:
            self._note(str(exc))
        return bool(self._shown(listed, what) != before)

    @staticmethod
    def _shown(listed: _Listed, what: str) -> Any:
        """What clients see of ``what`` (resources, prompts or both)."""
        resources = ([r.model_dump() for r in listed.resources],
                     [t.model_dump() for t in listed.templates], dict(listed.held_templates))
        prompts = ({n: p.model_dump() for n, (p, _) in listed.prompts.items()},
                   dict(listed.held_prompts))
        return {"resources": resources, "prompts": prompts}.get(what, (resources, prompts))

    async def _list_resources(self, upstream: Upstream, listed: _Listed) -> None:
        name = upstream.name
        resources = await _optional(upstream.list_resources())
        templates = await _optional(upstream.list_resource_templates())
        listed.resources = [r.model_copy(update={"uri": served_uri(name, r.uri)})
                            for r in resources]
        listed.templates, listed.held_templates = [], {}
        for template in templates:
            declaration = template.model_dump(by_alias=True, mode="json", exclude_none=True)
            why = self._held("template", qualify(name, template.name), upstream, declaration)
            if why:
                listed.held_templates[template.uri_template] = why
                continue
            listed.templates.append(template.model_copy(update={
                "uri_template": served_uri(name, template.uri_template)}))

    async def _list_prompts(self, upstream: Upstream, listed: _Listed) -> None:
        listed.prompts, listed.held_prompts = {}, {}
        for prompt in await _optional(upstream.list_prompts()):
            served = qualify(upstream.name, prompt.name)
            declaration = prompt.model_dump(by_alias=True, mode="json", exclude_none=True)
            why = self._held("prompt", served, upstream, declaration)
            if why:
                listed.held_prompts[served] = why
            else:
                listed.prompts[served] = (prompt.model_copy(update={"name": served}),
                                          prompt.name)

    def _held(self, kind: Kind, served: str, upstream: Upstream,
              declaration: dict[str, Any]) -> str | None:
        """Why a prompt or template is held (pinned like a tool), or None."""
        if self._pins is None:
            return None
        key = PREFIXES[kind] + served
        pin = self._pins.see(key, upstream.name, declaration,
                             trust=upstream.config.trust == "first-use", kind=kind)
        if pin.state == "trusted":
            return None
        why = ("changed upstream since it was trusted" if pin.state == "changed"
               else "not trusted yet")
        why = f"{why}; review it, then toolkeeper tools trust {key}"
        self._note(f"mcp {kind} '{served}' is held: {why}")
        return why

    # -- resources -----------------------------------------------------------------------
    async def list_resources(self) -> list[types.Resource]:
        return [r for server in sorted(self._listed) for r in self._listed[server].resources]

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return [t for server in sorted(self._listed) for t in self._listed[server].templates]

    def serves_resource(self, uri: str) -> bool:
        split = _split(uri)
        return split is not None and split[0] in self._upstreams

    def _upstream_of(self, uri: str) -> tuple[Upstream, str]:
        split = _split(uri)
        if split is None or split[0] not in self._upstreams:
            raise NotServed(f"no MCP server serves {uri!r} through the gateway (its resources "
                            f"are {RESOURCE_PREFIX}SERVER/URI)", RESOURCE_NOT_FOUND)
        upstream = self._upstreams[split[0]]
        if not upstream.config.resources:
            raise NotServed(f"the resources of MCP server '{upstream.name}' are not relayed "
                            "(resources = false)", RESOURCE_NOT_FOUND)
        why = self._held_for(upstream.name, split[1])
        if why:
            raise NotServed(f"{uri!r} is served by a resource template that is held: {why}",
                            RESOURCE_NOT_FOUND)
        return upstream, split[1]

    def _held_for(self, server: str, uri: str) -> str | None:
        """Why ``uri`` is refused: it matches only templates that are held."""
        from mcp.shared.uri_template import UriTemplate

        listed = self._listed.get(server)
        if listed is None or not listed.held_templates:
            return None
        if any(r.uri == served_uri(server, uri) for r in listed.resources):
            return None
        served = [t.uri_template[len(served_uri(server, "")):] for t in listed.templates]
        if any(_matches(UriTemplate, t, uri) for t in served):
            return None
        return next((why for t, why in listed.held_templates.items()
                     if _matches(UriTemplate, t, uri)), None)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        upstream, remote = self._upstream_of(uri)
        result = await upstream.request(lambda client: client.read_resource(remote))
        return result.model_copy(update={"contents": [
            c.model_copy(update={"uri": served_uri(upstream.name, c.uri)})
            for c in result.contents]})

    async def subscribe(self, uri: str, link: RelayLink) -> None:
        upstream, remote = self._upstream_of(uri)
        clients = self._subscribed.setdefault(uri, {})
        if not clients:
            await _subscription(upstream, "subscribe", remote)
        clients[link.client] = link

    async def unsubscribe(self, uri: str, link: RelayLink) -> None:
        upstream, remote = self._upstream_of(uri)
        clients = self._subscribed.get(uri, {})
        if clients.pop(link.client, None) is not None and not clients:
            del self._subscribed[uri]
            await _subscription(upstream, "unsubscribe", remote)

    async def resubscribe(self, server: str) -> None:
        """Subscribe again to what ``server``'s clients are subscribed to (after it
        reconnected: a new connection holds no subscription)."""
        upstream = self._upstreams[server]
        for uri in [u for u, clients in self._subscribed.items() if clients]:
            split = _split(uri)
            if split is None or split[0] != server:
                continue
            try:
                await _subscription(upstream, "subscribe", split[1])
            except UpstreamError as exc:
                self._note(f"could not subscribe again to {uri}: {exc}")

    async def updated(self, server: str, uri: str) -> None:
        """The upstream says one of its resources changed: tell the clients subscribed."""
        served = served_uri(server, uri)
        for client, link in list(self._subscribed.get(served, {}).items()):
            try:
                await link.resource_updated(served)
            except Exception:  # that client is gone: forget its subscription
                self._subscribed.get(served, {}).pop(client, None)

    # -- prompts -------------------------------------------------------------------------
    async def list_prompts(self) -> list[types.Prompt]:
        return [p for server in sorted(self._listed)
                for _, (p, _) in sorted(self._listed[server].prompts.items())]

    def serves_prompt(self, name: str) -> bool:
        return any(name in listed.prompts or name in listed.held_prompts
                   for listed in self._listed.values())

    def prompt_server(self, name: str) -> str:
        return next((server for server, listed in self._listed.items()
                     if name in listed.prompts or name in listed.held_prompts), "")

    def _prompt(self, name: str) -> tuple[Upstream, str]:
        for server, listed in self._listed.items():
            if name in listed.held_prompts:
                raise NotServed(f"prompt '{name}' is held: {listed.held_prompts[name]}")
            if name in listed.prompts:
                return self._upstreams[server], listed.prompts[name][1]
        raise NotServed(f"no upstream prompt named {name!r} (see prompts/list)")

    async def get_prompt(self, name: str, arguments: dict[str, str] | None
                         ) -> types.GetPromptResult:
        upstream, remote = self._prompt(name)
        return await upstream.request(lambda client: client.get_prompt(remote, arguments))

    async def complete(self, ref: types.PromptReference | types.ResourceTemplateReference,
                       argument: types.CompletionArgument,
                       context: types.CompletionContext | None) -> types.Completion | None:
        import mcp_types as types

        if isinstance(ref, types.PromptReference):
            if not self.serves_prompt(ref.name):
                return None
            upstream, remote = self._prompt(ref.name)
            upstream_ref: Any = types.PromptReference(name=remote)
        else:
            if not self.serves_resource(ref.uri):
                return None
            upstream, remote = self._upstream_of(ref.uri)
            upstream_ref = types.ResourceTemplateReference(uri=remote)
        given = context.arguments if context is not None else None
        result = await upstream.request(lambda client: client.complete(
            upstream_ref, {"name": argument.name, "value": argument.value}, given))
        return result.completion


async def _subscription(upstream: Upstream, verb: str, uri: str) -> None:
    """``resources/subscribe`` or ``/unsubscribe`` (the gateway speaks 2025-11-25 to its
    upstreams, where they are current; the SDK's helpers warn of the 2026 revision)."""
    import mcp_types as types

    request: Any = (types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
                    if verb == "subscribe" else
                    types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)))
    await upstream.request(lambda client: client.session.send_request(request,
                                                                      types.EmptyResult))


async def _optional(listing: Any) -> list[Any]:
    """A listing the upstream may not offer at all (method not found): empty."""
    from mcp_types import METHOD_NOT_FOUND

    try:
        return list(await listing)
    except UpstreamError as exc:
        if "Method not found" in str(exc) or str(METHOD_NOT_FOUND) in str(exc):
            return []
        raise


def _matches(parser: Any, template: str, uri: str) -> bool:
    try:
        return parser.parse(template).match(uri) is not None
    except ValueError:
        return False
