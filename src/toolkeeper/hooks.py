"""Lifecycle hooks: ``HookManager`` calls listeners on invocation events."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any

__all__ = ["HookEvent", "HookManager"]

log = logging.getLogger("toolkeeper.hooks")


class HookEvent(StrEnum):
    """What happened."""

    TOOL_START = "tool_start"
    TOOL_END = "tool_end"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    ARTIFACT_STORED = "artifact_stored"
    GUARDRAIL_TRIPPED = "guardrail_tripped"
    NOTIFICATION = "notification"
    """A notification of an approval request was sent, retried, failed or dropped (payload:
    channel, outcome, kind, request_id, attempts, error)."""


Hook = Callable[[HookEvent, dict[str, Any]], Awaitable[None] | None]


class HookManager:
    """Registers hooks per event and dispatches to them.

    A hook that raises is logged and skipped: an observer never breaks the call it observes.
    """

    def __init__(self) -> None:
        # Tuples, replaced on change: dispatch iterates a snapshot without copying it.
        self._hooks: dict[HookEvent, tuple[Hook, ...]] = {}

    def register(self, event: HookEvent | str, hook: Hook) -> Callable[[], None]:
        """Call ``hook(event, payload)`` on ``event``; returns a function that removes it."""
        key = HookEvent(event)
        self._hooks[key] = (*self._hooks.get(key, ()), hook)

        def remove() -> None:
            hooks = list(self._hooks.get(key, ()))
            if hook in hooks:
                hooks.remove(hook)
                self._hooks[key] = tuple(hooks)

        return remove

    def on(self, event: HookEvent | str) -> Callable[[Hook], Hook]:
        """Decorator form of ``register``."""
        def decorate(hook: Hook) -> Hook:
            self.register(event, hook)
            return hook

        return decorate

    def has(self, event: HookEvent) -> bool:
        return bool(self._hooks.get(event))

    async def dispatch(self, event: HookEvent, payload: dict[str, object]) -> None:
        """Call each hook of ``event`` with ``payload``; a payload that names its ``tool``
        also carries it as ``tool_name``, the key hooks written for an agents layer read (a
        second name, kept for good: a key of the public contract that hooks written for it
        read)."""
        if "tool" in payload and "tool_name" not in payload:
            payload = {**payload, "tool_name": payload["tool"]}
        for hook in self._hooks.get(event, ()):
            try:
                outcome = hook(event, payload)
                if outcome is not None and inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                log.exception("hook %r for %s failed", hook, event.value)
