"""Which channels a request goes to: ``urls`` (every request), the routes it matches (by risk,
tool, client, upstream), and ``escalate_urls`` for escalations."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..approval.models import ApprovalRequest
from ..config.notify import NotifySection, Target
from ..toolbox.catalog import CatalogBase
from .channels import Channel, channel_for

__all__ = ["Router", "client_of", "upstream_of"]


def client_of(session_id: str) -> str:
    """The client a session belongs to (``client-NAME`` → ``NAME``; another session is
    named as it is)."""
    return session_id.removeprefix("client-")


def upstream_of(catalog: CatalogBase | None) -> Callable[[str], str | None]:
    """The upstream MCP server a tool comes from (the gateway's ``mcp_server``), if any."""
    def find(tool: str) -> str | None:
        found = catalog.get(tool) if catalog is not None else None
        server = found.metadata.extra.get("mcp_server") if found is not None else None
        return server if isinstance(server, str) else None
    return find


class Router:
    """The channels of ``settings``, built once (every URL checked at start)."""

    def __init__(self, settings: NotifySection, *,
                 upstream: Callable[[str], str | None] | None = None,
                 make: Callable[..., Channel] = channel_for) -> None:
        key = settings.signing_key

        def built(targets: Sequence[Target], where: str) -> list[Channel]:
            return [make(t, f"{where}[{n}]", signing_key=key) for n, t in enumerate(targets)]

        self.everyone = built(settings.urls, "[approval.notify] urls")
        self.routes = [(route, built(route.urls, f"[[approval.notify.routes]] {n + 1}: urls"))
                       for n, route in enumerate(settings.routes)]
        self.escalation = built(settings.escalate_urls, "[approval.notify] escalate_urls")
        self.upstream = upstream if upstream is not None else upstream_of(None)

    def targets(self, request: ApprovalRequest) -> list[Channel]:
        """Where ``request`` is told (each channel once, in the order configured)."""
        found = list(self.everyone)
        upstream = self.upstream(request.tool)
        for route, channels in self.routes:
            if route.matches(risk=request.risk, tool=request.tool,
                             client=client_of(request.session_id), upstream=upstream):
                found += channels
        unique: dict[str, Channel] = {}
        for channel in found:
            unique.setdefault(channel.key, channel)
        return list(unique.values())

    def all(self) -> list[Channel]:
        return [*self.everyone, *(c for _, cs in self.routes for c in cs), *self.escalation]
