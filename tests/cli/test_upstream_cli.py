"""``toolkeeper upstream`` refuses what it cannot log in to in one line naming the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(("server", "said"), [
    ('name = "other"\nurl = "https://u.example/mcp"\n',
     "error: no MCP server named 'up' in {config} (configured: other)"),
    ('name = "up"\nurl = "https://u.example/mcp"\n',
     "error: MCP server 'up' has no [mcp.servers.oauth] in {config}: add one (grant = "
     "\"authorization_code\" or \"client_credentials\") to use OAuth"),
])
def test_login_names_what_is_missing_in_one_line(tmp_path: Path, server: str, said: str) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text(f"[mcp]\nenabled = true\n[[mcp.servers]]\n{server}")
    done = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "upstream", "login", "up", "--config",
         str(config), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, env={"COLUMNS": "400", "PATH": "/usr/bin"})
    assert done.returncode == 2
    assert done.stderr.strip() == said.format(config=config)
    assert not (tmp_path / "state").exists()


def test_status_with_no_oauth_upstream_says_so_and_how(tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[mcp]\nenabled = true\n[[mcp.servers]]\nname = "up"\n'
                      'url = "https://u.example/mcp"\n')
    done = subprocess.run(
        [sys.executable, "-m", "toolkeeper.cli", "upstream", "status", "--config", str(config),
         "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, env={"COLUMNS": "400", "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"no MCP server in {config} uses OAuth: give one an [mcp.servers.oauth] table "
        '(grant = "authorization_code" or "client_credentials")')
