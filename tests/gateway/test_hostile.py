"""An upstream can fail only itself: a real upstream process (the SDK alone) that names its tools
to break the catalog, shadows a local tool, or answers too much is contained to its own tools."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkeeper.config import MCPServerConfig
from toolkeeper.gateway.gateway import MCPGateway
from toolkeeper.gateway.pins import SqlitePins
from toolkeeper.toolbox import Toolbox

pytestmark = pytest.mark.anyio
UPSTREAM = str(Path(__file__).with_name("upstream_server.py"))


def _stdio(state: Path, **extra: object) -> MCPServerConfig:
    return MCPServerConfig(name="up", command=sys.executable, args=[UPSTREAM, str(state)],
                           env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                           connect_timeout_s=20, **extra)  # type: ignore[arg-type]


def _offers(state: Path, *names: str) -> None:
    (state / "tools.json").write_text(json.dumps([{"name": n} for n in names]))


def _pins(state: Path) -> SqlitePins:
    (state / "state").mkdir(exist_ok=True)
    return SqlitePins(state / "state" / "toolkeeper.db")


def _pins_cli(state: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "tools", "pins",
                           "--state-dir", str(state / "state")], capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_tools_whose_wire_names_collide_are_disabled_and_the_rest_served(
        tmp_path: Path) -> None:
    # 'up-a b' is sent on the MCP wire as 'up-a_b_<8 hex>', or '..._<16 hex>' when that is
    # taken: an upstream that also lists both literal names made every tools/list fail.
    digest = hashlib.sha256(b"up-a b").hexdigest()
    _offers(tmp_path, f"a_b_{digest[:8]}", f"a_b_{digest[:16]}", "a b")
    pins = _pins(tmp_path)
    toolbox = Toolbox()
    async with MCPGateway([_stdio(tmp_path)], pins=pins) as gateway:
        report = await gateway.attach(toolbox)
        exported = {d["name"] for d in toolbox.export("mcp").declarations}
    assert {"up-echo", "up-add", "up-wipe", "up-sleep"} <= exported  # the rest is served
    assert not exported & {f"up-a_b_{digest[:8]}", f"up-a_b_{digest[:16]}"}
    held = [ln for ln in report if "wire name" in ln]
    assert len(held) == 3 and all("is disabled" in ln for ln in held), report
    pin = pins.get("up-a b")
    assert pin is not None and pin.held is not None and "wire name" in pin.held
    listed = _pins_cli(tmp_path)
    assert "up-a b" in listed and "wire name" in listed
