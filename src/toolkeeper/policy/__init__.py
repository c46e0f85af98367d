"""Policy as code: who may call which tool with which arguments — allowed, asked or denied —
written in Cedar (the ``policy`` extra brings ``cedarpy``), beside the default set that
reproduces ``[security]``."""

from .decision import Matched, Outcome, PolicyDecision
from .defaults import decide_default, default_set_text
from .engine import Policies
from .store import PolicyRule, PolicyStore

__all__ = ["Matched", "Outcome", "Policies", "PolicyDecision", "PolicyRule", "PolicyStore",
           "decide_default", "default_set_text"]
