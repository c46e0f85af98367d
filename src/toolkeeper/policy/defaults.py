"""The default set: today's settings — the risk ceiling (``max_risk_unapproved``),
``unapproved_tools`` (``security.autonomy = "full"`` puts the built-ins there) and each tool's
own HITL mode — as three permits, one of them asking; resources and prompts are read, and every
operator may decide every approval request.

It is evaluated without Cedar (``decide_default``: the same three rules in Python, so the core
install needs no engine and a call pays a microsecond); ``default_set_text`` writes the same
rules as Cedar, for ``toolkeeper policy show`` and for the test that holds the two together. The
values come from the policy in force for each call (a session's own, a code-mode run's), never
from a copy taken when the set was built.
"""

from __future__ import annotations

import json
from typing import Protocol

from ..core.risk import HitlMode, ToolRisk
from ..core.spec import ToolLike
from .decision import Matched

__all__ = ["ASK", "DECIDE", "READ", "UNAPPROVED", "WITHIN", "Limits", "ceiling_of",
           "decide_default", "default_set_text", "tool_asks"]

UNAPPROVED = Matched(id="default.unapproved-tools", effect="permit", where="default",
                     reason="the tool is in unapproved_tools")
WITHIN = Matched(id="default.within-ceiling", effect="permit", where="default",
                 reason="its risk is at or below max_risk_unapproved")
ASK = Matched(id="default.ask", effect="permit", ask=True, where="default",
              reason="its risk is above max_risk_unapproved, or the tool asks")
READ = Matched(id="default.read", effect="permit", where="default",
               reason="resources and prompts are read without asking")
DECIDE = Matched(id="default.decide", effect="permit", where="default",
                 reason="every operator may decide every request")


class Limits(Protocol):
    """What the default set reads of the policy in force for a call (``ChainPolicy``)."""

    @property
    def max_risk_unapproved(self) -> ToolRisk | None: ...
    @property
    def unapproved_tools(self) -> frozenset[str]: ...


def ceiling_of(limits: Limits, *, chain: bool) -> ToolRisk:
    """The highest risk that runs without asking: the policy's, else SENSITIVE in an ordinary
    session and SAFE in a code-mode chain."""
    if limits.max_risk_unapproved is not None:
        return ToolRisk(limits.max_risk_unapproved)
    return ToolRisk.SAFE if chain else ToolRisk.SENSITIVE


def tool_asks(tool: ToolLike) -> bool:
    """The tool itself asks: an explicit HITL mode other than NONE (one only inherited from
    the risk says *how* to ask, not *whether*)."""
    return tool.hitl_explicit and tool.hitl_mode is not HitlMode.NONE


def decide_default(tool: ToolLike, limits: Limits, *, chain: bool) -> Matched:
    """The default set's permit for a call of ``tool``: ``UNAPPROVED`` or ``WITHIN`` (plain:
    it runs) or ``ASK`` (a person decides)."""
    if tool.name in limits.unapproved_tools:
        return UNAPPROVED
    if not tool_asks(tool) and tool.risk <= ceiling_of(limits, chain=chain):
        return WITHIN
    return ASK


def _annotations(rule: Matched) -> str:
    lines = [f"@id({json.dumps(rule.id)})"]
    if rule.ask:
        lines.append("@ask")
    lines.append(f"@reason({json.dumps(rule.reason)})")
    return "\n".join(lines)


def _ceiling_condition(limits: Limits) -> str:
    if limits.max_risk_unapproved is not None:
        return str(ToolRisk(limits.max_risk_unapproved).rank)
    return (f"(if context.code_mode then {ToolRisk.SAFE.rank} "
            f"else {ToolRisk.SENSITIVE.rank})")


def default_set_text(limits: Limits) -> str:
    """The default set for ``limits`` as Cedar text (``resource.level`` is the risk's place on
    the ladder, 0 for safe; ``resource.asks``: the tool has a HITL mode of its own)."""
    parts = ["// The default set: [security] and the session's limits, as Cedar.\n"
             "// Forbid wins; a plain permit runs the call; an @ask permit asks a person."]
    names = sorted(limits.unapproved_tools)
    if names:
        listed = ", ".join(json.dumps(n) for n in names)
        parts.append(f"{_annotations(UNAPPROVED)}\npermit (principal, action in "
                     f"Action::\"call_tool\", resource)\nwhen {{ [{listed}].contains("
                     "resource.name) };")
    parts.append(f"{_annotations(WITHIN)}\npermit (principal, action in Action::\"call_tool\", "
                 f"resource)\nwhen {{ !resource.asks && resource.level <= "
                 f"{_ceiling_condition(limits)} }};")
    parts.append(f"{_annotations(ASK)}\npermit (principal, action in Action::\"call_tool\", "
                 "resource);")
    parts.append(f"{_annotations(READ)}\npermit (principal, action in [Action::\"read_resource\","
                 " Action::\"get_prompt\"], resource);")
    parts.append(f"{_annotations(DECIDE)}\npermit (principal, action == Action::\"decide\", "
                 "resource);")
    return "\n\n".join(parts) + "\n"
