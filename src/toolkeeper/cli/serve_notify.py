"""``toolkeeper serve``'s notifications (``[approval.notify]``): the one place they are built.

Every channel is checked before the server starts (an unknown service, a malformed URL, an
environment variable not set, a JSON webhook without a key: one line naming the entry), and the
operator is told where requests will be announced."""

from __future__ import annotations

from dataclasses import dataclass

from ..approval.store import SqliteApprovalStore
from ..config import ToolkeeperConfig
from ..errors import ConfigError
from ..extras import MissingExtraError, require
from ..invoke.invoker import ToolInvoker
from ..notify.compose import Composer
from ..notify.links import DecisionLinks
from ..notify.notifier import Notifier
from ..notify.routing import Router, upstream_of
from ..server.notify_text import card_summary
from .report import fail
from .serve_listen import report_lines

__all__ = ["Notifying", "notifying"]


@dataclass(frozen=True)
class Notifying:
    """The notifier to run beside the server, and its decision links (direct decisions)."""

    notifier: Notifier
    links: DecisionLinks | None


def notifying(settings: ToolkeeperConfig | None, invoker: ToolInvoker) -> Notifying | None:
    """The notifications the config asks for, or ``None`` when it asks for none."""
    section = settings.approval.notify if settings is not None else None
    if section is None or not section.enabled:
        return None
    try:
        require("notify", "[approval.notify] notifications")
    except MissingExtraError as exc:
        raise fail(exc) from None
    service, store = invoker.approvals, invoker.approvals.store
    if not isinstance(store, SqliteApprovalStore):
        raise ConfigError("[approval.notify] needs the server's approval store")
    router = Router(section, upstream=upstream_of(invoker.registry))
    links = DecisionLinks(store.db) if section.direct_decisions else None
    composer = Composer(base_url=lambda: section.page_url or service.page_url,
                        where=service.where, summarize=card_summary(invoker.registry),
                        links=links)
    notifier = Notifier(store, section, router=router, composer=composer, hooks=service.hooks,
                        links=links)
    shown = ", ".join(f"{c.name} ({c.shown})" for c in router.all())
    report_lines([f"notifications of approval requests: {shown}" + (
        "; their buttons decide (direct_decisions): whoever holds a message can approve"
        if links is not None else "; their buttons open the card (the page's login decides)")])
    return Notifying(notifier=notifier, links=links)
