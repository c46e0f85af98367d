"""``toolkeeper serve`` names every extra its options and config need and lack in one line,
with the one install command that brings them all, before it starts anything — in a real
interpreter whose site holds only the core and the ``cli`` extra."""

from __future__ import annotations

from pathlib import Path

from tests.meta.test_light_core import ROOT, _core_python
from toolkeeper.cli.serve_extras import ServeAsks, needed_extras

COMMAND = "import sys; from toolkeeper.cli.entry import main; sys.argv[0] = 'toolkeeper'; main()"
EXAMPLE = str(ROOT / "examples" / "weather.py")


def test_serve_names_every_missing_extra_in_one_install_line(tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.toml"
    (tmp_path / "skills").mkdir()
    config.write_text('store = "postgresql://tk@db.internal/tk"\n\n[skills]\ndir = "skills"\n')
    done = _core_python(tmp_path / "run", COMMAND, "serve", EXAMPLE, "--config", str(config),
                        "--state-dir", str(tmp_path / "state"), "--oauth-issuer",
                        "https://login.example.com", "--oauth-resource",
                        "https://tools.example.com/mcp", extras=("cli",))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: toolkeeper serve needs the [server], [builtins], "
                               "[postgres], [oauth] and [skills] extras ("), lines[0]
    assert lines[0].endswith(": pip install 'toolkeeper[server,builtins,postgres,oauth,skills]'")
    assert not (tmp_path / "state").exists()  # said before anything started


def test_serve_without_builtins_asks_only_for_what_it_uses(tmp_path: Path) -> None:
    done = _core_python(tmp_path, COMMAND, "serve", EXAMPLE, "--no-builtins", "--state-dir",
                        str(tmp_path / "state"), extras=("cli",))
    assert done.stderr.strip() == ("error: toolkeeper serve needs the [server] extra (the "
                                   "server): pip install 'toolkeeper[server]'"), done.stderr


def test_an_upstream_with_oauth_asks_for_the_oauth_extra(tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.toml"
    config.write_text('[mcp]\nenabled = true\n[[mcp.servers]]\nname = "up"\n'
                      'url = "https://mcp.example.com/mcp"\n[mcp.servers.oauth]\n')
    assert needed_extras(ServeAsks(config=config))["oauth"] == "OAuth to upstream MCP servers"
