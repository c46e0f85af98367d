"""``Notifier``: tells people about approval requests, beside the calls and never in their way.

It reads the approval store's change log (the same one the page's live view replays, shared by
every replica): a new request is told to the channels its route names, one still pending after
``remind_after`` is told again, after ``escalate_after`` it goes to ``escalate_urls``, and one
that expired is said expired where it was told (escalations included). A call never waits for
any of this: the call path only writes the store, and the notifier's background task reads it.

Each send is a task of its own: at most ``CONCURRENCY`` at once per channel (a channel that
hangs holds only its own), at most ``MAX_QUEUED`` waiting (more are dropped and counted), each
attempt bounded by ``timeout_s``, ``attempts`` tries with backoff, and every outcome counted
(the ``NOTIFICATION`` hook: ``/metrics``), failures written to the send log (the page's line
about the last failure). A channel that fails, hangs or refuses costs its own task, nothing
else.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from dataclasses import dataclass

import anyio
import anyio.abc
import anyio.to_thread

from ..approval.models import ApprovalRequest
from ..approval.store import SqliteApprovalStore
from ..config.notify import NotifySection
from ..hooks import HookEvent, HookManager
from .channels import Channel, SendFailed
from .compose import Composer
from .ledger import Claim, NotifyLedger
from .links import DecisionLinks
from .message import Kind, Notice
from .routing import Router

__all__ = ["CONCURRENCY", "MAX_QUEUED", "POLL_S", "Notifier"]

log = logging.getLogger("toolkeeper.notify")

POLL_S = 0.2
"""How often the change log is read."""
CONCURRENCY = 8
"""Sends at once, per channel."""
MAX_QUEUED = 1000
SWEEP_S = 3600.0
SETTLE_AGAIN_S = 5.0
LOG_SENT_S = 60.0
"""A channel's sends that went out are logged at most once in this many seconds."""
WOKEN_S = 0.02
"""How long after this process's own request (its hook) the log is read: the request is
stored right after the hook."""
_EXPIRED = ("expired", "timeout")


@dataclass(frozen=True)
class _Message:
    """One message to claim and send: ``kind`` about ``request`` to ``channel`` (only where
    ``after`` was sent, when given)."""

    request: ApprovalRequest
    kind: Kind
    channel: Channel
    after: str | None = None


@dataclass
class _Waiting:
    """A pending request the notifier told someone about, and what it told since."""

    request: ApprovalRequest
    channels: list[Channel]
    reminded: bool = False
    escalated: bool = False
    settled_at: float = 0.0


class Notifier:
    """Notifications of ``store``'s requests through ``router``'s channels."""

    def __init__(self, store: SqliteApprovalStore, settings: NotifySection, *, router: Router,
                 composer: Composer, hooks: HookManager | None = None,
                 links: DecisionLinks | None = None, poll_s: float = POLL_S) -> None:
        self.store, self.settings, self.router, self.composer = store, settings, router, composer
        self.hooks, self.links, self.poll_s = hooks, links, poll_s
        self.ledger = NotifyLedger(store.db)
        self.counts: Counter[tuple[str, str]] = Counter()
        """(channel, outcome) → how many: ``sent``, ``retried``, ``failed``, ``dropped``."""
        self._waiting: dict[str, _Waiting] = {}
        self._queued = 0
        self._limiters: dict[str, anyio.CapacityLimiter] = {}
        self._failing: set[str] = set()
        self._sent_logged: dict[str, float] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self._wake: anyio.Event | None = None  # made in run(), in its event loop
        if hooks is not None:  # a request of this process: look at once, not at the next poll
            hooks.register(HookEvent.APPROVAL_REQUESTED, self._woken)

    def _woken(self, _event: HookEvent, _payload: dict[str, object]) -> None:
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Watch the store until cancelled (a server stopping)."""
        cursor = await anyio.to_thread.run_sync(self.store.last_event)
        swept = 0.0
        self._wake = anyio.Event()
        async with anyio.create_task_group() as group:
            self._group = group
            # asked before this start: each is told once in all (the claims say)
            pending = await anyio.to_thread.run_sync(self.store.pending)
            await self._tell([m for request in pending for m in self._asked(request)])
            while True:
                try:
                    if time.monotonic() - swept > SWEEP_S:
                        swept = time.monotonic()
                        await anyio.to_thread.run_sync(self._sweep)
                    cursor = await self._step(cursor)
                except Exception as exc:  # a store that failed once: read again next time
                    log.warning("notifications: reading the approval store failed (%s: %s); "
                                "trying again", type(exc).__name__, exc)
                await self._pause()

    async def _pause(self) -> None:
        """Until the next poll, or shortly after this process makes a request (the hook fires
        as the request is about to be stored)."""
        with anyio.move_on_after(self.poll_s):
            assert self._wake is not None
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep(WOKEN_S)

    def _sweep(self) -> None:
        self.ledger.sweep()
        if self.links is not None:
            self.links.sweep()

    async def _step(self, cursor: int) -> int:
        """Tell what changed since ``cursor``, then what is due; the new cursor."""
        changes = await anyio.to_thread.run_sync(self._read, cursor)
        messages: list[_Message] = []
        for seq, request_id, state, request in changes:
            cursor = seq
            if state == "pending" and request is not None:
                messages += self._asked(request)
            elif state in _EXPIRED:
                messages += self._expired(request_id)
            else:
                self._waiting.pop(request_id, None)  # decided: nothing more to say
        messages += self._due(time.time())
        await self._tell(messages)
        await self._settle(time.time())
        return cursor

    def _read(self, cursor: int) -> list[tuple[int, str, str, ApprovalRequest | None]]:
        """The changes after ``cursor``, with the request of each new one (one thread hop)."""
        found = []
        for seq, request_id, state in self.store.events(cursor):
            stored = self.store.get(request_id) if state == "pending" else None
            found.append((seq, request_id, state, stored.request if stored else None))
        return found

    def _asked(self, request: ApprovalRequest) -> list[_Message]:
        channels = self.router.targets(request)
        self._waiting[request.id] = _Waiting(request=request, channels=channels)
        return [_Message(request, "request", channel) for channel in channels]

    def _expired(self, request_id: str) -> list[_Message]:
        waiting = self._waiting.pop(request_id, None)
        if waiting is None:
            return []  # asked before this process watched, and not told by it
        # where it was asked, and where it was escalated (by any replica: the claims say)
        told = [(c, "request") for c in waiting.channels] + [
            (c, "escalation") for c in self.router.escalation]
        return [_Message(waiting.request, "expired", channel, after=after)
                for channel, after in told]

    def _due(self, now: float) -> list[_Message]:
        """Reminders and escalations whose time has come."""
        remind, escalate = self.settings.remind_after, self.settings.escalate_after
        due: list[_Message] = []
        for waiting in self._waiting.values():
            request, age = waiting.request, now - waiting.request.created_at
            if remind is not None and not waiting.reminded and age >= remind:
                waiting.reminded = True
                due += [_Message(request, "reminder", c) for c in waiting.channels]
            if escalate is not None and not waiting.escalated and age >= escalate:
                waiting.escalated = True
                due += [_Message(request, "escalation", c) for c in self.router.escalation]
        return due

    async def _settle(self, now: float) -> None:
        """Requests past their time-to-live are expired in the store (their change comes back
        through the log, and is told)."""
        for waiting in list(self._waiting.values()):
            expires = waiting.request.expires_at
            if expires is not None and expires <= now and now - waiting.settled_at > \
                    SETTLE_AGAIN_S:
                waiting.settled_at = now
                await anyio.to_thread.run_sync(self.store.settle, waiting.request.id)

    async def _tell(self, wanted: list[_Message]) -> None:
        """Claim ``wanted`` (one transaction) and send the ones this process won."""
        if not wanted:
            return
        won = await anyio.to_thread.run_sync(self.ledger.claim, [
            Claim(m.request.id, m.kind, m.channel.key, m.after) for m in wanted])
        for message, mine in zip(wanted, won, strict=True):
            if mine:  # else another replica (or an earlier start) sends it
                self._send(message.request, message.kind, message.channel)

    def _send(self, request: ApprovalRequest, kind: Kind, channel: Channel) -> None:
        """Start one message's delivery, unless too many wait already (then it is dropped
        and counted)."""
        if self._group is None or self._queued >= MAX_QUEUED:
            self.counts[channel.name, "dropped"] += 1
            log.warning("notifications: %s about %s to %s dropped: %d messages already wait",
                        kind, request.id, channel.shown, self._queued)
            return
        self._queued += 1
        self._group.start_soon(self._deliver, request, kind, channel)

    async def _deliver(self, request: ApprovalRequest, kind: Kind, channel: Channel) -> None:
        try:
            notice = await anyio.to_thread.run_sync(self.composer.notice, request, kind,
                                                    channel.name)
            attempts, error = self.settings.attempts, ""
            for attempt in range(1, attempts + 1):
                error = await self._attempt(channel, notice)
                if not error:
                    await self._outcome(request.id, kind, channel, "sent", attempt)
                    return
                if attempt < attempts:
                    await self._outcome(request.id, kind, channel, "retried", attempt, error)
                    await anyio.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)) *
                                      random.uniform(0.8, 1.2))
            await self._outcome(request.id, kind, channel, "failed", attempts, error)
        except Exception as exc:  # the store failed under this message: it is not sent
            log.warning("notifications: %s about %s to %s not sent: %s: %s", kind, request.id,
                        channel.shown, type(exc).__name__, exc)
        finally:
            self._queued -= 1

    def _logged(self, channel: str, outcome: str) -> bool:
        """Whether the send log keeps this outcome: every failure; a send that went out when
        it is the first since a failure here, or the first this minute (so the page's line
        about a failure ends once the channel works again, whichever replica sends)."""
        if outcome == "failed":
            self._failing.add(channel)
            return True
        if outcome != "sent":
            return False
        now = time.monotonic()
        if channel in self._failing or now - self._sent_logged.get(channel, -LOG_SENT_S) \
                >= LOG_SENT_S:
            self._failing.discard(channel)
            self._sent_logged[channel] = now
            return True
        return False

    async def _attempt(self, channel: Channel, notice: Notice) -> str:
        """One try: ``""`` when sent, else why not."""
        timeout = self.settings.timeout_s
        try:
            limiter = self._limiters.setdefault(channel.key, anyio.CapacityLimiter(CONCURRENCY))
            async with limiter:
                await channel.send(notice, timeout)
        except SendFailed as exc:
            return str(exc)
        except TimeoutError:
            return f"{channel.shown}: no answer within {timeout:g} s"
        except Exception as exc:  # a channel's own fault: counted like any failure
            return f"{channel.shown}: {type(exc).__name__}: {exc}"[:500]
        return ""

    async def _outcome(self, request_id: str, kind: Kind, channel: Channel, outcome: str,
                       attempts: int, error: str = "") -> None:
        self.counts[channel.name, outcome] += 1
        if self._logged(channel.name, outcome):
            await anyio.to_thread.run_sync(self.ledger.record, request_id, kind, channel.name,
                                           outcome, attempts, error or None)
        if outcome == "failed":
            log.warning("notifications: %s about %s to %s failed after %d attempts: %s", kind,
                        request_id, channel.shown, attempts, error)
        hooks = self.hooks
        if hooks is not None and hooks.has(HookEvent.NOTIFICATION):
            await hooks.dispatch(HookEvent.NOTIFICATION, {
                "channel": channel.name, "outcome": outcome, "kind": kind,
                "request_id": request_id, "attempts": attempts, "error": error})
