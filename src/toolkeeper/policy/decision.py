"""``PolicyDecision``: what the policies said of one request — allow, ask or deny — and which
policies decided it, with their reasons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Matched", "Outcome", "PolicyDecision"]

Outcome = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Matched:
    """One policy that decided a request.

    Attributes:
        id: Its ``@id`` (a stored rule's id; ``default.…`` for the default set; else
            ``FILE:LINE``).
        effect: ``permit`` or ``forbid``.
        ask: A permit marked ``@ask`` (a person decides).
        reason: Its ``@reason``, when it gives one.
        where: Where it is written: ``FILE:LINE``, ``store`` or ``default``.
        ttl: An asking permit's ``@ttl``: how long the request it makes stays approvable
            (seconds, or ``"never"``); ``None`` when it gives none.
        once: A stored rule marked ``@once``: it decides one call, then it is spent.
    """

    id: str
    effect: Literal["permit", "forbid"]
    ask: bool = False
    reason: str = ""
    where: str = ""
    ttl: float | Literal["never"] | None = None
    once: bool = False

    def describe(self) -> str:
        """``policy ID (REASON)``, for messages."""
        return f"policy {self.id}" + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True, kw_only=True, slots=True)
class PolicyDecision:
    """The outcome of one evaluation and the policies that decided it.

    ``allow``: a plain permit applies and no forbid does (the call runs without asking);
    ``ask``: every permit that applies is marked ``@ask`` (a person decides); ``deny``: a
    forbid applies, or no permit does (deny by default), or a forbid could not be evaluated.
    """

    outcome: Outcome
    policies: tuple[Matched, ...] = ()
    errors: tuple[str, ...] = ()
    """Policies that failed to evaluate (a failed forbid denies; a failed permit does not
    apply)."""

    @property
    def forbids(self) -> tuple[Matched, ...]:
        return tuple(p for p in self.policies if p.effect == "forbid")

    @property
    def claims(self) -> tuple[Matched, ...]:
        """The ``@once`` rules this outcome rests on (each must be spent before the outcome
        holds): none when a lasting policy of theirs decides it as well."""
        once = tuple(p for p in self.policies if p.once)
        lasting = [p for p in self.policies if not p.once]
        return () if lasting or not once else once

    @property
    def by_default_set(self) -> bool:
        """Whether only the default set decided (nothing of the operator's policies)."""
        return bool(self.policies) and all(p.where == "default" for p in self.policies)

    def message(self, tool: str) -> str:
        """Why a call of ``tool`` is refused, for the model (``deny`` only)."""
        if self.forbids:
            named = "; ".join(p.describe() for p in self.forbids)
            return (f"the call to '{tool}' is forbidden by {named}; it did not run and will "
                    "not run with these arguments — do not retry it unless the user asks")
        if self.errors:
            return (f"the call to '{tool}' is refused: a forbid policy could not be evaluated "
                    f"({'; '.join(self.errors)}), so it counts as applying; the operator must "
                    "fix the policy")
        return (f"the call to '{tool}' is refused: no policy permits it (deny by default); "
                "it did not run — the operator can add a permit policy for it (toolkeeper "
                "policy explain shows which policies were considered)")

    def refusal(self, action: str, what: str) -> str:
        """Why ``what`` (``reading resource 'URI'``, ``getting prompt 'NAME'``: the
        ``action`` ``read_resource``, ``get_prompt``) is refused, for the client (``deny``
        only)."""
        if self.forbids:
            named = "; ".join(p.describe() for p in self.forbids)
            return f"{what} is forbidden by {named}; do not retry it unless the user asks"
        if self.errors:
            return (f"{what} is refused: a forbid policy could not be evaluated "
                    f"({'; '.join(self.errors)}), so it counts as applying; the operator must "
                    "fix the policy")
        return (f"{what} is refused: no policy permits it (deny by default); the operator "
                f'can permit it (permit (principal, action == Action::"{action}", resource);)')

    def ttl(self) -> float | Literal["never"] | None:
        """The time-to-live the asking policies give the request (``ask`` only): the shortest
        ``@ttl`` among them, ``"never"`` only when that is all they say; ``None`` for none."""
        given = [p.ttl for p in self.policies if p.ask and p.ttl is not None]
        seconds = [t for t in given if t != "never"]
        if seconds:
            return min(seconds)
        return "never" if given else None

    def summary(self) -> str:
        """``allow by policy X``, for the audit row and ``policy explain``."""
        ids = ", ".join(p.id for p in self.policies) or "no policy"
        return f"{self.outcome} by {ids}"
