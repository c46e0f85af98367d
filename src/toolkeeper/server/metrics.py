"""``/metrics``: what ``toolkeeper serve`` is doing, in Prometheus' text format.

- ``toolkeeper_tool_calls_total{tool,status}`` and ``toolkeeper_tool_call_duration_seconds{tool}``:
  every call through the door (the invoker's TOOL_END hook);
- ``toolkeeper_client_calls_total{client,status}``: the same calls by who made them — a client
  token's name, or ``oauth:CLIENT_ID`` for an OAuth client (its users share the series); the
  first ``MAX_CLIENT_LABELS`` clients seen get a series each, later ones share ``_other``;
- ``toolkeeper_approvals_pending``, ``toolkeeper_approvals_decided_total{outcome}``,
  ``toolkeeper_approvals_expired_total`` and ``toolkeeper_approval_wait_seconds{outcome}``:
  read from the approval store's changes (so a decision made on the page, the CLI or another
  replica counts too); ``toolkeeper_approvals_oldest_waiting_seconds`` and
  ``toolkeeper_approval_time_to_decision_seconds{quantile="0.5"|"0.95"}`` (over the latest
  ``FIGURED`` decisions): the queue's figures, read from the store at each scrape;
- ``toolkeeper_upstream_up{upstream}``: 1 while the gateway holds a live connection to that
  MCP server, else 0;
- ``toolkeeper_notifications_total{channel,outcome}``: this process's notifications of approval
  requests (the ``NOTIFICATION`` hook): ``sent``, ``retried`` (an attempt failed, another
  follows), ``failed`` (every attempt failed) or ``dropped`` (too many waiting).

Only the operator reads it (the operator token, an OAuth access token with the operator scope,
or the page's login), or anyone on loopback
when ``toolkeeper serve --metrics-port`` serves it on a port of its own. The registry is this
server's own, never prometheus_client's global one.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..approval.store import FIGURED, QueueFigures, SqliteApprovalStore
from ..gateway.gateway import MCPGateway
from ..hooks import HookEvent
from ..invoke.invoker import ToolInvoker
from .clients import OPERATOR
from .requests import caller_of

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["MAX_CLIENT_LABELS", "MAX_TOOL_LABELS", "NO_CLIENT", "OTHER_TOOL", "UNKNOWN_TOOL",
           "ServerMetrics", "client_label"]

UNKNOWN_TOOL = "_unknown"
"""The ``tool`` label of a call naming no tool of the catalog: a client cannot make a series
per name it invents."""
OTHER_TOOL = "_other"
"""The ``tool`` label once ``MAX_TOOL_LABELS`` tools have one (a catalog that keeps growing)."""
MAX_TOOL_LABELS = 2000
MAX_CLIENT_LABELS = 100
"""Clients with a series of their own in ``toolkeeper_client_calls_total``; later ones share
``_other`` (``OTHER_TOOL``), so a server with many clients keeps a bounded number of series."""
MAX_ENDS = 10_000
"""(tool, client, status) triples whose series a call's end finds in one lookup; past them, in
three (the series stay as many as the labels allow)."""
NO_CLIENT = "_none"
"""The ``client`` label of a call no client made (the library's own session)."""
CALL_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0)
WAIT_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
DECIDED = ("approved", "denied", "skipped")
EXPIRED = ("expired", "timeout")
"""An expired request's state in the change log ('timeout': its name in earlier releases)."""
_EVENTS = ("SELECT seq, request_id, state, ts FROM approval_events WHERE seq > ? "
           "ORDER BY seq LIMIT 500")


class ServerMetrics:
    """The figures of one server: counted as calls end and approvals change, rendered per
    scrape. ``invoker``'s hooks (a ``HookManager``) feed the call figures; without hooks
    there are none."""

    def __init__(self, invoker: ToolInvoker, *, gateway: MCPGateway | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.invoker, self.gateway = invoker, gateway
        self.registry = CollectorRegistry()
        self.calls = Counter("toolkeeper_tool_calls", "Tool calls through the door, by tool and "
                             "how they ended.", ["tool", "status"], registry=self.registry)
        self.by_client = Counter("toolkeeper_client_calls", "Tool calls through the door, by "
                                 "client and how they ended.", ["client", "status"],
                                 registry=self.registry)
        self.latency = Histogram("toolkeeper_tool_call_duration_seconds", "How long a call "
                                 "took, every gate included.", ["tool"], buckets=CALL_BUCKETS,
                                 registry=self.registry)
        self.decided = Counter("toolkeeper_approvals_decided", "Approval requests decided, by "
                               "outcome.", ["outcome"], registry=self.registry)
        self.expired = Counter("toolkeeper_approvals_expired", "Approval requests that ended "
                               "without an answer.", registry=self.registry)
        self.waited = Histogram("toolkeeper_approval_wait_seconds", "From a request to its "
                                "decision.", ["outcome"], buckets=WAIT_BUCKETS,
                                registry=self.registry)
        self.notifications = Counter("toolkeeper_notifications", "Notifications of approval "
                                     "requests, by channel and how they ended.",
                                     ["channel", "outcome"], registry=self.registry)
        self.registry.register(_Live(self))
        store = invoker.approvals.store
        self.store = store if isinstance(store, SqliteApprovalStore) else None
        self._cursor = self.store.last_event() if self.store is not None else 0
        self._tools: set[str] = set()
        self._clients: set[str] = set()
        self._series: dict[tuple[int | str, ...], Any] = {}
        """The call series by their labels, as many as the labels are (``MAX_TOOL_LABELS``,
        ``MAX_CLIENT_LABELS``, the statuses)."""
        self._ends: dict[tuple[Any, Any, Any], tuple[Any, Any, Any]] = {}
        """A call's end's three series by its (tool, client, status) (``_ends_of``)."""
        self._counting = threading.Lock()  # two scrapes at once count each change once
        hooks = invoker.approvals.hooks
        if hooks is not None:
            hooks.register(HookEvent.TOOL_END, self._ended)
            hooks.register(HookEvent.NOTIFICATION, self._notified)

    def _notified(self, _event: HookEvent, payload: dict[str, Any]) -> None:
        self.notifications.labels(str(payload.get("channel", "")),
                                  str(payload.get("outcome", ""))).inc()

    def _ended(self, _event: HookEvent, payload: dict[str, Any]) -> None:
        key = (payload.get("tool", ""), payload.get("client") or "", payload.get("status", ""))
        series = self._ends.get(key)
        if series is None:
            series = self._ends_of(*key)
        calls, by_client, latency = series
        calls.inc()
        by_client.inc()
        latency.observe(float(payload.get("duration_ms", 0.0)) / 1000)

    def _ends_of(self, tool: object, client: object, status: object) -> tuple[Any, Any, Any]:
        """The three series a call's end counts in, by its tool, client and status as the
        hook names them: looked up (labels bounded, ``_label`` and ``_client``) once per
        such triple, while the triples are few (``MAX_ENDS``)."""
        label, who, said = self._label(str(tool)), self._client(str(client)), str(status)
        series = (self._series_of(self.calls, label, said),
                  self._series_of(self.by_client, who, said), self._series_of(self.latency, label))
        if label in self._tools and len(self._ends) < MAX_ENDS:  # a tool's label is for good
            self._ends[(tool, client, status)] = series
        return series

    def _series_of(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, made once per label values (``labels`` checks the
        values and takes a lock each time)."""
        key: tuple[int | str, ...] = (id(metric), *labels)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = metric.labels(*labels)
        return series

    def _client(self, client: str) -> str:
        label = client_label(client)
        if label in self._clients:
            return label
        if len(self._clients) >= MAX_CLIENT_LABELS:
            return OTHER_TOOL
        self._clients.add(label)
        return label

    def _label(self, name: str) -> str:
        if name in self._tools:
            return name
        if self.invoker.registry.get(name) is None:
            return UNKNOWN_TOOL
        if len(self._tools) >= MAX_TOOL_LABELS:
            return OTHER_TOOL
        self._tools.add(name)
        return name

    def catch_up(self) -> None:
        """Count the approval store's changes since the last scrape (blocking: a thread)."""
        store = self.store
        if store is None:
            return
        with self._counting:
            self._count(store)

    def _count(self, store: SqliteApprovalStore) -> None:
        store.settle()  # requests past their time expire now, not at the next page view
        while rows := store.db.query(_EVENTS, (self._cursor,)):
            for seq, request_id, state, ts in rows:
                self._cursor = int(str(seq))
                if state in EXPIRED:
                    self.expired.inc()
                elif state in DECIDED:
                    self.decided.labels(str(state)).inc()
                    stored = store.get(str(request_id))
                    if stored is not None:
                        wait = float(str(ts)) - stored.request.created_at
                        self.waited.labels(str(state)).observe(max(0.0, wait))

    def render(self) -> bytes:
        """The text a scrape gets (blocking: a thread)."""
        from prometheus_client import generate_latest

        self.catch_up()
        return generate_latest(self.registry)

    def figures(self) -> QueueFigures | None:
        """The queue's figures now (``None`` without a store)."""
        return self.store.figures() if self.store is not None else None

    def upstreams(self) -> dict[str, bool]:
        gateway = self.gateway
        if gateway is None:
            return {}
        up = {}
        for server in gateway.servers:
            try:
                up[server.name] = gateway.upstream(server.name).connected() is not None
            except KeyError:  # the gateway is not running (yet)
                up[server.name] = False
        return up

    async def endpoint(self, request: Request) -> Response:
        """``GET /metrics`` for the operator only: no credential 401, a client's 403."""
        from starlette.responses import JSONResponse

        caller = caller_of(request)
        if caller.client != OPERATOR:
            status = 403 if caller.client else 401
            return JSONResponse({"error": "forbidden" if caller.client else "unauthorized",
                                 "message": "/metrics is the operator's: send the operator token "
                                 "(or an OAuth access token with the operator scope) as "
                                 "'Authorization: Bearer <token>', or serve it on loopback "
                                 "with toolkeeper serve --metrics-port"}, status_code=status,
                                headers={"www-authenticate": "Bearer"} if status == 401 else None)
        return await self.open_endpoint(request)

    async def open_endpoint(self, _request: Request) -> Response:
        """``GET /metrics`` for whoever reaches it (``--metrics-port``: loopback only)."""
        from prometheus_client import CONTENT_TYPE_LATEST
        from starlette.responses import Response

        body = await anyio.to_thread.run_sync(self.render)
        return Response(body, media_type=CONTENT_TYPE_LATEST)


def client_label(client: str) -> str:
    """The ``client`` label of a caller: its name, an OAuth client's ``oauth:CLIENT_ID``
    without the user (``oauth:CLIENT_ID:SUB`` would make a series per person), ``_none`` for
    none."""
    if not client:
        return NO_CLIENT
    if client.startswith("oauth:"):
        return ":".join(client.split(":")[:2])
    return client


class _Live:
    """The figures read at scrape time: approvals pending now, upstreams up now."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        pending = GaugeMetricFamily("toolkeeper_approvals_pending",
                                    "Approval requests waiting for a person now.")
        figures = self.metrics.figures()
        pending.add_metric([], figures.waiting if figures else 0)
        yield pending
        oldest = GaugeMetricFamily("toolkeeper_approvals_oldest_waiting_seconds",
                                   "How long the oldest request waiting now has waited (0: none "
                                   "waits).")
        oldest.add_metric([], figures.oldest_s or 0.0 if figures else 0.0)
        yield oldest
        decision = GaugeMetricFamily(
            "toolkeeper_approval_time_to_decision_seconds", "From a request to a person's "
            f"decision, over the latest {FIGURED} decisions: the median and the 95th "
            "percentile.", labels=["quantile"])
        for label, value in (("0.5", figures.median_s if figures else None),
                             ("0.95", figures.p95_s if figures else None)):
            if value is not None:
                decision.add_metric([label], value)
        yield decision
        up = GaugeMetricFamily("toolkeeper_upstream_up", "1 while the gateway is connected to "
                               "the upstream MCP server, else 0.", labels=["upstream"])
        for name, live in sorted(self.metrics.upstreams().items()):
            up.add_metric([name], 1.0 if live else 0.0)
        yield up
