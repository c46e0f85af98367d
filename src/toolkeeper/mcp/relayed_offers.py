"""The gateway's upstream resources and prompts beside a server's own: ``OfferHandlers`` whose
listings add the upstreams' and whose reads, gets, subscriptions and completions of what the
gateway serves go to it (``RelayedHandlers``). Every read and get, the server's own or
relayed, is first decided by the door's policies (``offer_policy``), and a listing shows only
what its caller may read or get."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..core.context import Caller
from ..gateway.sources import RESOURCE_PREFIX, resource_server
from .offer_handlers import OfferHandlers, caller_of
from .offer_policy import check_prompt, check_resource, refused_entry
from .relayed import RelayedHandlers
from .uris import normal_uri
from .wire import Ctx

if TYPE_CHECKING:
    from ..invoke.invoker import ToolInvoker
    from ..invoke.session import InvokerSession

__all__ = ["RelayedOffers"]

P = TypeVar("P", bound=Any)


class RelayedOffers(OfferHandlers):
    """Prompts, resources and completion: this server's own, then its gateway's."""

    relayed: RelayedHandlers | None
    invoker: ToolInvoker
    fixed_session: InvokerSession | None

    def caller_for(self, ctx: Ctx) -> Caller:
        """Who makes this request (a server with a fixed session: that session's caller)."""
        return self.fixed_session.caller if self.fixed_session is not None else caller_of(ctx)

    async def list_prompts(self, ctx: Ctx, params: Any) -> types.ListPromptsResult:
        listed = await super().list_prompts(ctx, params)
        upstream = await self.relayed.list_prompts(ctx, params) \
            if self.relayed is not None else None
        prompts = [*listed.prompts, *(upstream.prompts if upstream else [])]
        shown = [p for p in prompts if _allowed(partial(self.checked_prompt, ctx, p.name))]
        return listed.model_copy(update={"prompts": shown})

    def checked_prompt(self, ctx: Ctx, name: str) -> bool:
        """Refuse getting the prompt ``name`` when the policies deny it (``MCPError``);
        whether the gateway relays it."""
        relayed = self.relayed is not None and self.relayed.sources.serves_prompt(name)
        server = self.relayed.sources.prompt_server(name) \
            if self.relayed is not None and relayed else ""
        check_prompt(self.invoker.policies, ctx, self.caller_for(ctx), name, server)
        return relayed

    async def recorded(self, ctx: Ctx, method: str, target: str, check: Callable[[], bool]
                       ) -> bool:
        """``check()``, a refusal written to the audit log before it is raised."""
        try:
            return check()
        except MCPError as refused:
            audit = self.invoker.audit
            if audit is not None:
                key = "uri" if method.startswith("resources/") else "name"
                server = self.relayed.sources.prompt_server(target) if key == "name" and \
                    self.relayed is not None and self.relayed.sources.serves_prompt(target) \
                    else resource_server(target) if target.startswith(RESOURCE_PREFIX) else ""
                entry = refused_entry(self.session_for(ctx).id, method,
                                      {key: target, "server": server}, refused)
                await anyio.to_thread.run_sync(audit.record, entry)
            raise

    async def get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult | types.InputRequiredResult:
        relayed = await self.recorded(ctx, "prompts/get", params.name,
                                      partial(self.checked_prompt, ctx, params.name))
        if self.relayed is not None and relayed:
            return await self.relayed.get_prompt(ctx, params)
        return await super().get_prompt(ctx, params)

    async def list_resources(self, ctx: Ctx, params: Any) -> types.ListResourcesResult:
        listed = await super().list_resources(ctx, params)
        upstream = await self.relayed.list_resources(ctx, params) \
            if self.relayed is not None else None
        resources = [*listed.resources, *(upstream.resources if upstream else [])]
        shown = [r for r in resources
                 if _allowed(partial(self.checked_resource, ctx, str(r.uri)))]
        return listed.model_copy(update={"resources": shown})

    async def list_resource_templates(self, ctx: Ctx, params: Any
                                      ) -> types.ListResourceTemplatesResult:
        listed = await super().list_resource_templates(ctx, params)
        if self.relayed is None:
            return listed
        upstream = await self.relayed.list_resource_templates(ctx, params)
        return listed.model_copy(update={"resource_templates": [
            *listed.resource_templates, *upstream.resource_templates]})

    def checked_resource(self, ctx: Ctx, uri: str) -> bool:
        """Refuse reading ``uri`` when the policies deny it (``MCPError``); whether it is in
        the gateway's namespace."""
        relayed = self.relayed is not None and uri.startswith(RESOURCE_PREFIX)
        check_resource(self.invoker.policies, ctx, self.caller_for(ctx), uri,
                       resource_server(uri) if relayed else "")
        return relayed

    async def read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        params = _normal(params)  # what is judged is what the upstream is asked for
        relayed = await self.recorded(ctx, "resources/read", str(params.uri),
                                      partial(self.checked_resource, ctx, str(params.uri)))
        # the gateway's namespace: it names what is wrong with a URI no upstream serves
        if self.relayed is not None and relayed:
            return await self.relayed.read_resource(ctx, params)
        return await super().read_resource(ctx, params)

    async def subscribe(self, ctx: Ctx, params: Any) -> types.EmptyResult:
        params = _normal(params)
        await self.recorded(ctx, "resources/subscribe", str(params.uri),  # not read: not watched
                            partial(self.checked_resource, ctx, str(params.uri)))
        if self.relayed is not None and self.relayed.sources.serves_resource(str(params.uri)):
            return await self.relayed.subscribe(ctx, params)
        return await super().subscribe(ctx, params)

    async def unsubscribe(self, ctx: Ctx, params: Any) -> types.EmptyResult:
        params = _normal(params)
        if self.relayed is not None and self.relayed.sources.serves_resource(str(params.uri)):
            return await self.relayed.unsubscribe(ctx, params)
        return await super().unsubscribe(ctx, params)

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams
                       ) -> types.CompleteResult:
        ref = params.ref
        if getattr(ref, "type", "") == "ref/prompt":  # a prompt refused has no values offered
            name = str(getattr(ref, "name", ""))
            await self.recorded(ctx, "completion/complete", name,
                                partial(self.checked_prompt, ctx, name))
        upstream = self.relayed is not None and (
            self.relayed.sources.serves_prompt(str(getattr(ref, "name", "")))
            if getattr(ref, "type", "") == "ref/prompt"
            else self.relayed.sources.serves_resource(str(getattr(ref, "uri", ""))))
        if upstream and self.relayed is not None:
            return await self.relayed.complete(ctx, params)
        return await super().complete(ctx, params)


def _allowed(check: Callable[[], object]) -> bool:
    """Whether ``check`` passes: a listing shows only what the caller may read or get."""
    try:
        check()
    except MCPError:
        return False
    return True


def _normal(params: P) -> P:
    """``params`` with a relayed resource's URI in its normal form (``mcp.uris``)."""
    uri = str(params.uri)
    normal = normal_uri(uri, RESOURCE_PREFIX)
    return params if normal == uri else cast(P, params.model_copy(update={"uri": normal}))
