"""default_tools: the seven tools a coding agent needs, with risks and hints, through the one door."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ToolCall, ToolInvoker, ToolRisk
from toolkeeper.approval import AutoApprovalHandler
from toolkeeper.builtins import SecurityPolicy, default_tools

from ..workspaces import hand_over

pytestmark = pytest.mark.anyio


@pytest.fixture
def ws(reachable: Path) -> Path:
    root = reachable / "ws"
    root.mkdir()
    (root / "auth.py").write_text("def refresh_token(session):\n    '''Refresh an expired OAuth "
                                  "access token.'''\n    return session.renew()\n")
    (root / "math_utils.py").write_text("def add(a, b):\n    return a + b\n")
    hand_over(root)
    return root


def test_the_seven_minimal_tools_with_risks_and_hints(ws: Path) -> None:
    tools = {t.name: t for t in default_tools(SecurityPolicy(workspace=ws))}
    assert list(tools) == ["shell", "file_read", "file_write", "file_edit", "glob_search",
                           "content_search", "semantic_code_search"]
    assert {n for n, t in tools.items() if t.risk is ToolRisk.SAFE} == {
        "file_read", "glob_search", "content_search", "semantic_code_search"}
    assert tools["file_write"].metadata.mcp_annotations()["destructiveHint"] is True
    assert tools["file_read"].metadata.mcp_annotations()["readOnlyHint"] is True


def test_semantic_code_search_ranks_chunks(ws: Path) -> None:
    tools = {t.name: t for t in default_tools(SecurityPolicy(workspace=ws))}
    out = str(tools["semantic_code_search"].run_raw({"query": "where are tokens refreshed"}))
    assert out.startswith("## auth.py:1-3")


async def test_builtins_go_through_the_invoker_and_high_risk_needs_approval(ws: Path) -> None:
    tools = default_tools(SecurityPolicy(workspace=ws))
    strict = ToolInvoker(tools)
    approving = ToolInvoker(tools, approval_handler=AutoApprovalHandler())
    write = ToolCall(id="1", name="file_write", arguments={"path": "new.txt", "content": "hi"})
    async with strict.open_session() as session:
        denied = await strict.invoke(write, session=session)
        read = await strict.invoke(ToolCall(id="2", name="file_read",
                                            arguments={"path": "math_utils.py"}), session=session)
    assert denied.status == "denied" and not (ws / "new.txt").exists()
    assert "return a + b" in read.text
    async with approving.open_session() as session:
        written = await approving.invoke(write, session=session)
        refused = await approving.invoke(ToolCall(id="3", name="file_write", arguments={
            "path": ".git/hooks/post-checkout", "content": "evil"}), session=session)
    assert written.ok and (ws / "new.txt").read_text() == "hi"
    assert (refused.status, refused.error_code) == ("denied", "policy_violation")
    assert "forbidden-path rule" in refused.text


def test_builtins_have_english_and_chinese_descriptions(ws: Path) -> None:
    from toolkeeper.toolbox import Toolbox

    box = Toolbox(default_tools(SecurityPolicy(workspace=ws)))
    chinese = box.localized("zh-CN")
    read: Any = chinese.get("file_read")
    assert read.description.startswith("读取文本文件")
    assert read.parameters["properties"]["path"]["description"] == (
        "文件路径（相对于工作区）。")
    assert all(chinese.lookup(name).description != box.lookup(name).description for name in box.names())
    assert chinese.search("搜索文件内容")[0].name in ("content_search", "glob_search")
