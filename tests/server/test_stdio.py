"""``toolkeeper serve --stdio`` launched the way a desktop client launches it (from ``/``, as
an ordinary user, with the official MCP client's stdio transport): its state goes to the
user's state dir, a person decides on a loopback page whose link is on stderr, and a waiting
call is told, and tells its client, what it waits for."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from toolkeeper.sandbox import UNPRIVILEGED_UID

from .test_serve import EXAMPLE

pytestmark = pytest.mark.anyio

ALERT = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}


@pytest.fixture
def home() -> Iterator[Path]:
    """A home an unprivileged user owns (the tests may run as root)."""
    path = Path(tempfile.mkdtemp(prefix="tk-home-"))
    path.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _launch(home: Path, *args: str) -> StdioServerParameters:
    command = [sys.executable, "-m", "toolkeeper.cli", "serve", "--stdio", EXAMPLE,
               "--no-builtins", *args]
    if os.geteuid() == 0:  # as a desktop client's user: not root
        command = ["setpriv", f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}",
                   "--clear-groups", *command]
    return StdioServerParameters(command=command[0], args=command[1:], cwd="/", env={
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)})


async def _wait_for(errlog: Path, pattern: str) -> re.Match[str]:
    with anyio.fail_after(30):
        while True:
            found = re.search(pattern, errlog.read_text())
            if found:
                return found
            await anyio.sleep(0.05)


async def test_a_desktop_launch_from_root_dir_keeps_state_per_user_and_offers_the_page(
        home: Path, tmp_path: Path) -> None:
    errlog = tmp_path / "server.log"
    said: list[str] = []

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        said.append(message or "")

    with errlog.open("w") as err:
        async with Client(stdio_client(_launch(home, "--approval-wait", "2.5"), errlog=err)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            forecast = await client.call_tool("get_forecast", {"city": "Lisbon"})
            asked = await client.call_tool("broadcast_alert", ALERT, progress_callback=heard)
            text = asked.content[0].text  # type: ignore[union-attr]
            request_id = text.split("(request ")[1].split(")")[0]
            log = await _wait_for(errlog, r"approval page: (http://127\.0\.0\.1:\d+)/login\?"
                                          r"code=(\S+)")
            url = log.group(1)
            assert f"waits for a person's approval (request {request_id}): " \
                   f"{url}/approvals/{request_id}" in errlog.read_text()
            state = home / ".local" / "state" / "toolkeeper"
            operator = (state / "token").read_text().strip()
            decided = httpx.post(f"{url}/api/approvals/{request_id}/decision", json={
                "decision": "approve"}, headers={"Authorization": f"Bearer {operator}"})
            assert decided.status_code == 200, decided.text
            ran = await client.call_tool("broadcast_alert", ALERT)
    assert {"get_forecast", "broadcast_alert"} <= names and not forecast.is_error
    assert asked.is_error and "Call the same tool again with the same arguments" in text
    assert f"{url}/approvals/{request_id}" in text  # the model can tell the user where
    assert said and all(request_id in m and url in m for m in said)
    assert not ran.is_error and "PT-11" in ran.content[0].text  # type: ignore[union-attr]
    assert (state / "toolkeeper.db").stat().st_mode & 0o777 == 0o600
    assert state.stat().st_mode & 0o777 == 0o700
    assert "Traceback" not in errlog.read_text()
