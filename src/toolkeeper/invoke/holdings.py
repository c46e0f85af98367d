"""``Holdings``: which artifacts each owner may pass to a tool as ``{"$artifact": ref}``.

An artifact ref names data: whoever can make it resolve reads what a call stored. So a ref
resolves only for the owner it was made for — a session id with its client, which a client's
session and that client's code-mode runs share — and for any other it is an unknown ref, told
as one that never existed. An owner holds a ref while one of its sessions keeps it pinned (a
session pins what its calls store; it lets go when it releases or closes).
"""

from __future__ import annotations

import threading

__all__ = ["Holdings", "Owner"]

Owner = tuple[str, str]
"""(session id, client): ``("client-alice", "alice")`` for a served client and its scripts."""


class Holdings:
    """Per owner, the refs its sessions hold, each with how many of them hold it."""

    def __init__(self) -> None:
        self._held: dict[Owner, dict[str, int]] = {}
        self._lock = threading.Lock()

    def hold(self, owner: Owner, ref: str) -> None:
        """One more session of ``owner`` holds ``ref``."""
        with self._lock:
            refs = self._held.setdefault(owner, {})
            refs[ref] = refs.get(ref, 0) + 1

    def let_go(self, owner: Owner, ref: str) -> None:
        """One session of ``owner`` no longer holds ``ref``."""
        with self._lock:
            refs = self._held.get(owner)
            if refs is None or ref not in refs:
                return
            refs[ref] -= 1
            if refs[ref] <= 0:
                del refs[ref]
                if not refs:
                    del self._held[owner]

    def holds(self, owner: Owner, ref: str) -> bool:
        """Whether some session of ``owner`` holds ``ref`` now."""
        with self._lock:
            return ref in self._held.get(owner, ())
