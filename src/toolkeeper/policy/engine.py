"""``Policies``: what a door decides with — the default set, the operator's Cedar files and the
rules kept in the store — read at start, read again when a file or a rule changes, and asked
once per call: allow, ask or deny.

Forbid wins over everything. Then the operator's permits (files, stored rules), when any
applies: a plain permit allows, permits that all carry ``@ask`` ask a person. When none
applies, the default set (today's ``[security]`` settings, ``defaults.py``) decides the same way;
it always has a permit for a tool call, so with it a call is denied only by a forbid.
``[policy] defaults = false`` leaves it out: what nothing permits is denied.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..core.context import Caller
from ..core.spec import ToolLike
from ..errors import ConfigError, ToolkeeperError
from ..extras import MissingExtraError
from ..toolbox.catalog import CatalogBase
from .compiled import CompiledSet, Verdict
from .decision import Matched, PolicyDecision
from .defaults import DECIDE, READ, Limits, decide_default, default_set_text
from .schema import (
    args_type,
    cedar_args,
    cedar_schema,
    decide_args_type,
    decide_context,
    operator_entity,
    tool_entity,
)
from .source import Written, check, parse_text
from .store import PolicyRule, PolicyStore

__all__ = ["Policies", "combine"]

WATCH_S = 0.2
"""How often a watching ``Policies`` looks for a changed file, rule or catalog."""


class Policies:
    """The policy set of one door.

    Args:
        catalog: The tools the policies are checked against (the invoker's).
        directory: Where ``*.cedar`` files are read from (``policies/`` beside
            ``toolkeeper.toml``, or ``[policy] dir``); missing: none.
        text: Cedar text by name (``{"inline": "forbid (…);"}``), for a program's own policies.
        store: The rules made from decisions (``PolicyStore``).
        defaults: Include the default set (``[security]`` as policies); ``False``: only
            what is written decides, and what nothing permits is denied.
        workspace: The workspace a call's context names.
        report: Where a problem found while watching goes (one line; the last good set stays).
    """

    def __init__(self, catalog: CatalogBase, *, directory: Path | None = None,
                 text: Mapping[str, str] | None = None, store: PolicyStore | None = None,
                 defaults: bool = True, workspace: Path | str | None = None,
                 report: Callable[[str], None] | None = None) -> None:
        self.catalog, self.directory, self.store = catalog, directory, store
        self.texts = dict(text or {})
        self.defaults = defaults
        self.workspace = str(workspace or "")
        self.report = report
        self._compiled: CompiledSet | None = None
        self._files: list[Written] = []
        self._rules: list[Written] = []
        self._seen: tuple[object, ...] | None = None
        self._uses: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._counting = threading.Lock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._last_problem = ""
        self.awaiting: frozenset[str] = frozenset()
        """Upstream MCP servers whose tools are not listed yet: a policy naming one of their
        tools (``NAME-…``) is checked once they are (``listed``)."""

    def listed(self, server: str) -> None:
        """Upstream ``server``'s tools are listed: policies naming them are checked at the
        next ``refresh`` (the watcher's), and one naming a tool it lacks is reported."""
        self.awaiting = self.awaiting - {server}

    @property
    def governs(self) -> bool:
        """Whether anything besides the default set can ever decide (files, text, a store,
        or no default set): only then does a door need its policy gate."""
        return bool(self.directory or self.texts or self.store or not self.defaults)

    def files(self) -> list[Path]:
        """The ``*.cedar`` files read, in name order."""
        if self.directory is None or not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob("*.cedar") if p.is_file())

    def _signature(self) -> tuple[object, ...]:
        stamps = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in self.files())
        version = self.store.version() if self.store is not None else 0
        return stamps, version, tuple(self.catalog.names()), self.awaiting

    def load(self) -> None:
        """Read and check every policy now.

        Raises:
            ConfigError: a policy that does not parse, or names what does not exist
                (``FILE:LINE`` and the nearest name).
            MissingExtraError: Cedar policies without the ``policy`` extra.
        """
        with self._lock:
            seen = self._signature()
            files = [w for name, text in self._sources() for w in parse_text(text, name)]
            rules = [self._rule(r) for r in (self.store.rules() if self.store else [])]
            self._build(files, rules)
            self._files, self._rules, self._seen = files, rules, seen

    def _sources(self) -> list[tuple[str, str]]:
        found = [(str(p), p.read_text(encoding="utf-8")) for p in self.files()]
        return found + list(self.texts.items())

    @staticmethod
    def _rule(rule: PolicyRule) -> Written:
        written = parse_text(rule.cedar, rule.id, stored=True)[0]
        matched = written.matched
        reason = matched.reason or rule.reason
        return Written(matched=Matched(id=rule.id, effect=matched.effect, ask=matched.ask,
                                       reason=reason, where="store", ttl=matched.ttl,
                                       once=matched.once),
                       est=written.est, text=written.text, expires=rule.expires)

    def _build(self, files: list[Written], rules: list[Written]) -> None:
        self._compiled = self._compile(files, rules)

    def _compile(self, files: list[Written], rules: list[Written]) -> CompiledSet:
        now = time.time()
        policies = [*files, *(r for r in rules if r.expires is None or r.expires > now)]
        if not policies:
            return CompiledSet(policies=[], args={})
        import cedarpy

        tools = self.catalog.all()
        args = {t.qualified_name: args_type(t) for t in tools}
        _unique(policies)
        schema = cedarpy.Schema.from_json_str(json.dumps(cedar_schema(tools)))
        check(policies, schema, {name: frozenset(_attributes(kind)) for name, kind in args.items()},
              self.awaiting)
        return CompiledSet(policies=policies, args=args, decide_args=decide_args_type(tools))

    def check_with(self, rule: PolicyRule) -> None:
        """Check the set with ``rule`` added, as a server would read it (nothing changes).

        Raises:
            ConfigError: ``rule`` names what does not exist, or repeats an id.
        """
        if self._compiled is None:
            self.load()
        self._compile(self._files, [*self._rules, self._rule(rule)])

    def written(self) -> list[Written]:
        """The policies read from files and text (after ``load``)."""
        return list(self._files)

    def refresh(self) -> bool:
        """Read the policies again if a file, a stored rule or the catalog changed; whether
        it did. A problem keeps the last good set and is raised."""
        if self._signature() == self._seen:
            return False
        self.load()
        return True

    def decide(self, tool: ToolLike, caller: Caller, arguments: object, *, limits: Limits,
               chain: bool, protocol: str = "", era: str = "") -> PolicyDecision:
        """Allow, ask or deny a call of ``tool`` by ``caller`` with ``arguments`` (validated),
        under ``limits`` (the call's own policy, which the default set reads); ``protocol`` and
        ``era``: the MCP revision the request speaks and its era (empty outside MCP)."""
        default = decide_default(tool, limits, chain=chain) if self.defaults else None
        compiled = self._current()
        if compiled is None or not compiled.policies:
            return combine(Verdict(), default)
        verdict = compiled.evaluate(tool, caller, arguments, code_mode=chain, protocol=protocol,
                                    era=era, workspace=self.workspace)
        if verdict.expired:
            self._expire()
            return self.decide(tool, caller, arguments, limits=limits, chain=chain,
                               protocol=protocol, era=era)
        decision = combine(verdict, default)
        stored = [p.id for p in decision.policies if p.where == "store" and not p.once]
        if stored:
            with self._counting:
                self._uses.update(stored)
        return decision

    def settle(self, decision: PolicyDecision, tool: ToolLike, caller: Caller,
               arguments: object, *, limits: Limits, chain: bool, protocol: str = "",
               era: str = "") -> PolicyDecision:
        """The outcome once the ``@once`` rules it rests on are spent (``decision.claims``):
        the first one the store still holds is spent (used up on every replica at once) and
        the outcome stands; those already spent elsewhere are dropped here and the call is
        decided again. A store write: run it off the event loop."""
        while decision.claims:
            spent = self._spend(decision.claims)
            if spent:
                return decision
            decision = self.decide(tool, caller, arguments, limits=limits, chain=chain,
                                   protocol=protocol, era=era)
        return decision

    def _spend(self, claims: tuple[Matched, ...]) -> bool:
        """Spend one of ``claims`` in the store; each is dropped from this process's set
        either way (spent now, or by another process before)."""
        assert self.store is not None
        try:
            return any(self.store.spend(rule.id) for rule in claims)
        finally:
            with self._lock:
                gone = {rule.id for rule in claims}
                self._rules = [r for r in self._rules if r.id not in gone]
                self._build(self._files, self._rules)

    def decide_offer(self, action: str, name: str, caller: Caller, *, server: str = "",
                     protocol: str = "", era: str = "") -> PolicyDecision:
        """Allow or deny ``caller`` reading the resource ``name`` (``action``
        ``read_resource``; a URI) or getting the prompt ``name`` (``get_prompt``), relayed
        from the upstream ``server`` if any. A person is never asked about a read: an ``@ask``
        permit (one whose scope leaves the action open) does not apply to it."""
        default = READ if self.defaults else None
        compiled = self._current()
        if compiled is None or not compiled.policies:
            return combine(Verdict(), default)
        verdict = compiled.evaluate_offer(action, name, caller, server=server,
                                          protocol=protocol, era=era, workspace=self.workspace)
        if verdict.expired:
            self._expire()
            return self.decide_offer(action, name, caller, server=server, protocol=protocol,
                                     era=era)
        plain = tuple(p for p in verdict.permits if not p.ask and not p.once)
        return combine(Verdict(permits=plain, forbids=verdict.forbids,
                               failed_forbids=verdict.failed_forbids), default)

    def may_decide(self, operator: str, *, tool: str, found: ToolLike | None, risk: str,
                   client: str, reason: str, arguments: object, via: str = "",
                   scopes: Iterable[str] = ()) -> PolicyDecision:
        """Whether ``operator`` may decide a request for ``tool`` (``found``: the tool in the
        catalog, ``None`` when it is gone) asked by ``client``: ``allow`` or ``deny`` with the
        policies that said so. The default set lets every operator decide everything."""
        default = DECIDE if self.defaults else None
        compiled = self._current()
        if compiled is None or not compiled.policies:
            return combine(Verdict(), default)
        entity = tool_entity(found) if found is not None else _gone_tool(tool, risk)
        context = decide_context(cedar_args(arguments, compiled.decide_args) or {},
                                 client=client, risk=risk, reason=reason)
        verdict = compiled.evaluate_decide(operator_entity(operator, via, scopes), entity,
                                           context)
        if verdict.expired:
            self._expire()
            return self.may_decide(operator, tool=tool, found=found, risk=risk, client=client,
                                   reason=reason, arguments=arguments, via=via, scopes=scopes)
        decision = combine(verdict, default)
        if decision.outcome == "ask":  # @ask means nothing to a decision: a permit is a permit
            return PolicyDecision(outcome="allow", policies=decision.policies)
        return decision

    def _current(self) -> CompiledSet | None:
        compiled = self._compiled
        if compiled is None and self.governs:
            self.load()
            compiled = self._compiled
        if compiled is not None and time.time() >= compiled.next_expiry:
            self._expire()
            compiled = self._compiled
        return compiled

    def _expire(self) -> None:
        """Rebuild without the stored rules whose time is over (no store read needed)."""
        with self._lock:
            self._build(self._files, self._rules)

    def candidates(self, tool: ToolLike) -> list[Matched]:
        """The operator's policies that can apply to calls of ``tool`` (for ``explain``)."""
        compiled = self._current()
        chosen = compiled.for_tool(tool.qualified_name) if compiled else None
        return [w.matched for w in chosen.written.values()] if chosen else []

    def text(self, limits: Limits) -> str:
        """The effective set as Cedar text: the default set (when included) for ``limits``,
        then each file, then the stored rules in force."""
        parts = [default_set_text(limits)] if self.defaults else [
            "// [policy] defaults = false: only the policies below decide.\n"]
        for name, text in self._sources():
            parts.append(f"// {name}\n{text.strip()}\n")
        for rule in self.store.rules() if self.store else []:
            ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rule.expires)) \
                if rule.expires else "until revoked"
            parts.append(f"// stored rule {rule.id} by {rule.author} ({ends})\n"
                         f"{rule.cedar.strip()}\n")
        return "\n".join(parts)

    def watch(self, interval: float = WATCH_S) -> None:
        """Look for changes every ``interval`` seconds in a thread of its own (and count the
        stored rules' uses) until ``close``."""
        if self._watcher is not None:
            return
        self._watcher = threading.Thread(target=self._loop, args=(interval,), daemon=True,
                                         name="toolkeeper-policies")
        self._watcher.start()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self._tick()

    def _tick(self) -> None:
        try:
            if self.refresh():
                self._last_problem = ""
            self.flush()
        except (ToolkeeperError, MissingExtraError, OSError) as exc:
            problem = f"policies not reloaded, the last good set still decides: {exc}"
            if problem != self._last_problem and self.report is not None:
                self.report(problem)
            self._last_problem = problem

    def flush(self) -> None:
        """Write the counted uses of stored rules to the store."""
        if self.store is None or not self._uses:
            return
        with self._counting:
            counted, self._uses = self._uses, Counter()
        try:
            self.store.add_uses(dict(counted))
        except ToolkeeperError:
            with self._counting:  # counted again at the next flush
                self._uses.update(counted)
            raise

    def close(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
            self._watcher = None
        with contextlib.suppress(ToolkeeperError):
            self.flush()


def combine(verdict: Verdict, default: Matched | None) -> PolicyDecision:
    """The outcome: a forbid (or a forbid that failed to evaluate) denies; else the operator's
    permits decide when any applies — a plain one allows, ``@ask`` ones ask — so a written
    ``@ask`` makes even a safe call ask and a stored "allow similar" rule runs a risky one;
    else the default set decides; with nothing that permits, deny."""
    if verdict.forbids or verdict.failed_forbids:
        return PolicyDecision(outcome="deny", policies=verdict.forbids,
                              errors=verdict.failed_forbids)
    permits = verdict.permits or ((default,) if default is not None else ())
    plain = tuple(p for p in permits if not p.ask)
    if plain:
        return PolicyDecision(outcome="allow", policies=plain)
    if permits:
        return PolicyDecision(outcome="ask", policies=permits)
    return PolicyDecision(outcome="deny")


def _gone_tool(name: str, risk: str) -> dict[str, object]:
    """The ``Tool`` entity of a request whose tool is no longer in the catalog: its name and
    the risk it was asked with."""
    rank = {"safe": 0, "sensitive": 1, "high": 2, "critical": 3}.get(risk, 3)
    return {"uid": {"type": "Tool", "id": name}, "parents": [], "attrs": {
        "name": name, "namespace": "", "server": "", "kind": "", "risk": risk, "level": rank,
        "asks": False, "hitl_mode": "", "tags": [], "read_only": False, "destructive": False,
        "idempotent": False, "open_world": False}}


def _attributes(kind: Mapping[str, object]) -> list[str]:
    attributes = kind.get("attributes")
    return list(attributes) if isinstance(attributes, dict) else []


def _unique(policies: list[Written]) -> None:
    seen: dict[str, str] = {}
    for policy in policies:
        if policy.id in seen:
            raise ConfigError(f"{policy.matched.where}: @id({policy.id!r}) is also the id of the "
                              f"policy at {seen[policy.id]}; each policy's id must be unique")
        seen[policy.id] = policy.matched.where
