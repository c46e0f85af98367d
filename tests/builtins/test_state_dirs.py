"""No tool reads or writes inside a toolkeeper state folder, whichever server's it is and
wherever in the workspace it lies: the file tools check every directory they pass through, the
searches never enter one, and a sandboxed command neither sees one nor writes into it.

The state folders here are made by the code ``toolkeeper serve`` makes its own with (tokens,
a SQLite store), in a workspace — a project folder where another server keeps its state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkeeper import PolicyViolationError, Tool
from toolkeeper.builtins.files import file_tools
from toolkeeper.builtins.policy import SecurityPolicy
from toolkeeper.builtins.search import search_tools
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.cli.state import secure_state_dir
from toolkeeper.sandbox import BubblewrapSandbox
from toolkeeper.server.clients import ClientTokens
from toolkeeper.server.tokens import default_client_token, operator_token

from ..workspaces import hand_over


def _state(folder: Path, *, marked: bool = True) -> list[str]:
    """A server's state folder as serve leaves it; its two tokens. Unmarked: as an earlier
    version left it (no marker, the same files)."""
    if marked:
        secure_state_dir(folder)
    else:
        folder.mkdir(parents=True)
    token, _ = operator_token(folder)
    client = default_client_token(folder, ClientTokens(folder / "toolkeeper.db"))
    (folder / "server.json").write_text('{"url": "http://127.0.0.1:1"}')
    assert client is not None
    return [token, client]


@pytest.fixture
def ws(reachable: Path) -> Path:
    root = reachable / "project"
    root.mkdir()
    (root / "notes.txt").write_text("canary-7f3\n")
    return root


def tools(ws: Path) -> dict[str, Tool]:
    policy = SecurityPolicy(workspace=ws, autonomy="full")
    return {t.name: t for t in [*file_tools(policy), *search_tools(policy),
                                shell_tool(policy, sandbox=BubblewrapSandbox())]}


def _said(tool: Tool, **arguments: object) -> str:
    try:
        return str(tool.run_raw(arguments))
    except PolicyViolationError as exc:
        return f"refused: {exc}"


@pytest.mark.parametrize("where", [".toolkeeper", "deep/inside/state"])
@pytest.mark.parametrize("marked", [True, False], ids=["marked", "an-earlier-versions"])
def test_no_tool_reads_another_servers_state_folder_in_the_workspace(
        ws: Path, where: str, marked: bool) -> None:
    secrets = _state(ws / where, marked=marked)
    (ws / "link").symlink_to(where)
    hand_over(ws)
    found = tools(ws)
    said = [_said(found["file_read"], path=f"{where}/{name}")
            for name in ("token", "client-token", "server.json", "toolkeeper.db")]
    said += [_said(found["file_read"], path="link/token"),
             _said(found["glob_search"], pattern="**/*"),
             _said(found["glob_search"], pattern="*", path=where),
             _said(found["content_search"], pattern="tkc_"),
             _said(found["content_search"], pattern=secrets[0][:12]),
             _said(found["shell"], command=f"cat {where}/token {where}/client-token; ls -a "
                                           f"{where}; cat link/client-token")]
    assert not [text for text in said if any(s in text for s in secrets)], said
    assert all("server.json" not in text or text.startswith("refused") for text in said)
    assert "toolkeeper_state" in said[0] and where in said[0]
    assert "notes.txt" in said[5] and "canary-7f3" in _said(found["content_search"],
                                                            pattern="canary")


def _names(folder: Path) -> list[str]:
    """What a state folder holds, but SQLite's own journal files (they come and go with its
    connections)."""
    return sorted(n for n in os.listdir(folder) if not n.startswith("toolkeeper.db-"))


def test_no_tool_writes_into_a_state_folder(ws: Path) -> None:
    _state(ws / ".toolkeeper")
    hand_over(ws)
    found = tools(ws)
    before = _names(ws / ".toolkeeper")
    write = _said(found["file_write"], path=".toolkeeper/approve.txt", content="x")
    edit = _said(found["file_edit"], path=".toolkeeper/server.json", old="1", new="2")
    shell = _said(found["shell"], command="echo x > .toolkeeper/evil; echo ok > fine.txt")
    assert write.startswith("refused") and "toolkeeper_state" in write
    assert edit.startswith("refused")
    assert _names(ws / ".toolkeeper") == before
    assert (ws / "fine.txt").read_text() == "ok\n"
    assert "[exit code" in shell


def test_a_file_named_like_a_token_is_never_written(ws: Path) -> None:
    """A file named ``token`` would make its folder look like state (and lock tools out)."""
    hand_over(ws)
    found = tools(ws)
    said = _said(found["file_write"], path="src/token", content="x")
    shell = _said(found["shell"], command="mkdir -p src && echo x > src/client-token && echo y "
                                          "> src/ok.txt")
    assert said.startswith("refused") and "toolkeeper_state" in said
    assert not (ws / "src" / "client-token").exists() and (ws / "src" / "ok.txt").exists()
    assert "src/client-token" in shell


def test_a_workspace_that_is_a_state_folder_is_refused(ws: Path) -> None:
    _state(ws / "state")
    hand_over(ws)
    found = tools(ws / "state")
    for said in (_said(found["file_read"], path="server.json"),
                 _said(found["glob_search"], pattern="*"),
                 _said(found["shell"], command="ls")):
        assert said.startswith("refused") and "toolkeeper state" in said, said


def test_the_key_upstream_tokens_are_sealed_under_marks_a_state_folder(ws: Path) -> None:
    """A copied ``upstream-key`` opens every upstream's OAuth tokens in the store: the folder
    holding it is state, whatever else it holds."""
    (ws / "kept").mkdir()
    (ws / "kept" / "upstream-key").write_text("c2VjcmV0LWtleS0wMTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM\n")
    hand_over(ws)
    found = tools(ws)
    said = _said(found["file_read"], path="kept/upstream-key")
    assert said.startswith("refused") and "toolkeeper_state" in said
    assert "c2VjcmV0" not in _said(found["shell"], command="cat kept/upstream-key")
