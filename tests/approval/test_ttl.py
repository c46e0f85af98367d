"""A time-to-live per tool: the tool's own ``approval_ttl`` (seconds or ``"never"``), the
operator's ``approval_ttl_tools`` over it, and the policy's ``approval_ttl_s`` as the default
for every other tool."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from toolkeeper import tool
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.approval.models import NEVER_S
from toolkeeper.config import ToolkeeperConfig
from toolkeeper.errors import ConfigError
from toolkeeper.invoke import ChainPolicy, ToolInvoker
from toolkeeper.policy import Policies
from toolkeeper.toolbox import Toolbox

from ..invoke.helpers import call

pytestmark = pytest.mark.anyio


@tool(risk="critical", approval_ttl="never")
def wire_money(amount: int) -> str:
    """Send money."""
    return f"sent {amount}"


@tool(risk="critical", approval_ttl=0.3)
def page_someone(who: str) -> str:
    """Page a person."""
    return f"paged {who}"


@tool(risk="critical")
def drop_table(name: str) -> str:
    """Drop a table."""
    return f"dropped {name}"


async def _lifetimes(tmp_path: Path, policy: ChainPolicy, cedar: str | None = None
                     ) -> dict[str, float]:
    store = SqliteApprovalStore(tmp_path / "a.db")
    box = Toolbox([wire_money, page_someone, drop_table])
    door = ToolInvoker(box, PersistedApprovalHandler(store, wait_s=0, poll_s=0.01),
                       policy=policy,
                       policies=Policies(box, text={"t.cedar": cedar}) if cedar else None)
    async with door.open_session() as session:
        for name, arguments in (("wire_money", {"amount": 1}), ("page_someone", {"who": "a"}),
                                ("drop_table", {"name": "t"})):
            result = await door.invoke(call(name, **arguments), session=session)
            assert result.status == "pending", result.text
    return {s.request.tool: round(s.request.expires_at - s.request.created_at, 3)
            for s in store.requests() if s.request.expires_at is not None}


async def test_each_tool_keeps_its_own_time_to_live_and_others_the_policys(tmp_path: Path
                                                                           ) -> None:
    policy = ChainPolicy(approval_timeout_s=0, approval_ttl_s=3600)
    assert await _lifetimes(tmp_path, policy) == {
        "wire_money": NEVER_S, "page_someone": 0.3, "drop_table": 3600}


async def test_the_operators_setting_wins_over_the_tools_own(tmp_path: Path) -> None:
    policy = ChainPolicy(approval_timeout_s=0, approval_ttl_s=3600,
                         approval_ttl_tools={"wire_money": 60, "drop_table": "never"})
    assert await _lifetimes(tmp_path, policy) == {
        "wire_money": 60, "page_someone": 0.3, "drop_table": NEVER_S}


ASKING = '''
@id("money-asks") @ask @ttl("120")
permit (principal, action == Action::"wire_money", resource);

@id("tables-wait") @ask @ttl("never")
permit (principal, action == Action::"drop_table", resource);

@id("paging-asks") @ask
permit (principal, action == Action::"page_someone", resource);
'''


async def test_the_asking_policys_ttl_wins_over_the_tools_and_the_operators(tmp_path: Path
                                                                           ) -> None:
    policy = ChainPolicy(approval_timeout_s=0, approval_ttl_s=3600,
                         approval_ttl_tools={"wire_money": 60})
    assert await _lifetimes(tmp_path, policy, ASKING) == {
        "wire_money": 120, "page_someone": 0.3, "drop_table": NEVER_S}


@pytest.mark.parametrize(("annotations", "said"), [
    ('@ttl("60")', "add @ask, or remove @ttl"),
    ('@ask @ttl("soon")', 'must be seconds above 0 (@ttl("900")) or @ttl("never")'),
    ('@ask @ttl("-5")', "must be seconds above 0")])
def test_a_ttl_the_policies_cannot_use_is_refused_saying_what_they_take(
        annotations: str, said: str) -> None:
    box = Toolbox([wire_money])
    text = f'{annotations}\npermit (principal, action == Action::"wire_money", resource);\n'
    with pytest.raises(ConfigError, match=re.escape(said)):
        Policies(box, text={"t.cedar": text}).load()


async def test_a_tools_short_time_to_live_expires_its_request_and_the_model_reads_so(
        tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "a.db")
    door = ToolInvoker(Toolbox([page_someone]),
                       PersistedApprovalHandler(store, wait_s=30, poll_s=0.01),
                       policy=ChainPolicy(approval_timeout_s=30, approval_ttl_s=3600))
    async with door.open_session() as session:
        result = await door.invoke(call("page_someone", who="b"), session=session)
    assert result.error_code == "expired" and "nobody decided within 0.3 s" in result.text


def test_a_time_to_live_that_is_not_positive_is_refused_naming_the_tool() -> None:
    with pytest.raises(ValidationError, match="drop_table"):
        ChainPolicy(approval_ttl_tools={"drop_table": 0})
    def nothing() -> None:
        """Do nothing."""

    with pytest.raises(ValidationError, match="approval_ttl must be"):
        tool(risk="high", approval_ttl=-1)(nothing)
    with pytest.raises(ValidationError, match="wire_money"):
        ToolkeeperConfig.model_validate({"approval": {"ttl": {"wire_money": -5}}})
    parsed = ToolkeeperConfig.model_validate({"approval": {"ttl": {"wire_money": "never"}}})
    assert parsed.approval.ttl == {"wire_money": "never"}
