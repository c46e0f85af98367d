"""Policy files are out of every command's reach: a command that writes a ``*.cedar`` file in
the workspace (beside the policies, or anywhere) leaves nothing behind, and one that reads the
policies finds nothing to read."""

from __future__ import annotations

from pathlib import Path

from toolkeeper.builtins.policy import DEFAULT_COMMANDS, SecurityPolicy
from toolkeeper.builtins.shell import shell_tool
from toolkeeper.sandbox import BubblewrapSandbox

from ..workspaces import hand_over

POLICY = 'forbid (principal, action == Action::"deploy", resource);\n'


def test_a_command_neither_reads_nor_writes_a_cedar_file(reachable: Path) -> None:
    ws = reachable / "ws"
    (ws / "policies").mkdir(parents=True)
    (ws / "policies" / "team.cedar").write_text(POLICY)
    hand_over(ws)
    shell = shell_tool(SecurityPolicy(workspace=ws, autonomy="full",
                                      allowed_commands=DEFAULT_COMMANDS),
                       sandbox=BubblewrapSandbox())
    out = str(shell.run_raw({"command": (
        "cat policies/team.cedar; echo 'permit (principal, action, resource);' > "
        "policies/open.cedar; echo x > deep.cedar; echo fine > notes.txt; echo done")}))
    assert "done" in out and "Action::" not in out  # the policy was not read
    assert sorted(p.name for p in (ws / "policies").iterdir()) == ["team.cedar"]
    assert (ws / "policies" / "team.cedar").read_text() == POLICY
    assert not (ws / "deep.cedar").exists()
    assert (ws / "notes.txt").read_text() == "fine\n"  # the rest of the run is applied
    assert "rule security.forbidden_paths '*.cedar'" in out
