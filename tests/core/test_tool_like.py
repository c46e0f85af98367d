"""Every kind of tool meets ``ToolLike``, and what reads a tool reads only what it declares."""

from __future__ import annotations

import pytest

from toolkeeper import HostedTool, ProviderDefinedTool, Tool, Toolbox, ToolResult, tool
from toolkeeper.approval.service import ApprovalService, WaitPolicy
from toolkeeper.approval.states import stored
from toolkeeper.core.call import ToolCall
from toolkeeper.core.context import ToolContext
from toolkeeper.core.risk import HitlMode, ToolRisk
from toolkeeper.core.spec import HandlesCalls, ToolLike
from toolkeeper.errors import StoreError, UsageError


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Computer(ProviderDefinedTool):
    async def handle_call(self, call: ToolCall, ctx: ToolContext | None) -> ToolResult:
        return ToolResult.text_result("clicked")


SEARCH = HostedTool(name="web_search", provider_specs={"openai": {"type": "web_search"}})
COMPUTER = Computer(name="computer", provider_specs={"openai": {"type": "computer_use"}})


@pytest.mark.parametrize("made", [add, SEARCH, COMPUTER])
def test_every_kind_of_tool_is_tool_like(made: object) -> None:
    assert isinstance(made, ToolLike)


def test_only_provider_defined_tools_handle_calls() -> None:
    assert isinstance(COMPUTER, HandlesCalls)
    assert not isinstance(SEARCH, HandlesCalls)
    assert not isinstance(add, HandlesCalls)


def test_a_toolbox_refuses_what_is_no_tool() -> None:
    with pytest.raises(UsageError, match="cannot add 3 to a toolbox"):
        Toolbox([3])


def test_a_hosted_tool_cannot_be_executed_directly() -> None:
    box = Toolbox([add, SEARCH])
    assert box.execute_tool("add", a=1, b=2) == 3
    with pytest.raises(UsageError, match="'web_search' is a hosted tool"):
        box.execute_tool("web_search", query="x")


def test_hitl_explicit_tells_a_chosen_mode_from_an_inherited_one() -> None:
    plain = Tool.from_function(add.run_raw, name="plain").replace(risk=ToolRisk.HIGH)
    chosen = plain.replace(hitl_mode=HitlMode.BLOCKING)
    assert (plain.hitl_explicit, chosen.hitl_explicit) == (False, True)
    service = ApprovalService()  # the default ceiling is above nothing the chain may not do
    policy = WaitPolicy()
    assert service.needs_approval(chosen.replace(risk=ToolRisk.SAFE), policy=policy, chain=False)
    assert not service.needs_approval(plain.replace(risk=ToolRisk.SAFE), policy=policy,
                                      chain=False)


def test_a_state_read_back_is_checked() -> None:
    assert stored("approved") == "approved"
    with pytest.raises(StoreError, match="'maybe' as an approval's state"):
        stored("maybe")


def test_a_tool_s_kind_is_read_as_declared() -> None:
    from toolkeeper.tools.hosted import is_hosted_tool, is_provider_defined_tool

    assert is_hosted_tool(SEARCH) and not is_provider_defined_tool(SEARCH)
    assert is_provider_defined_tool(COMPUTER) and not is_hosted_tool(COMPUTER)
    assert not is_hosted_tool(add) and not is_provider_defined_tool(add)
    assert not is_hosted_tool(HostedTool) and not is_hosted_tool({"provider_specs": {}})
    box = Toolbox([add, SEARCH, COMPUTER])
    assert [e.kind for e in box.explain()] == ["local", "hosted", "provider-defined"]
