"""``/metrics`` of a real ``toolkeeper serve``: calls made with the official MCP client, an
approval decided through the API, a live and a dead upstream, scraped and read back with
prometheus_client's own text parser; only the operator (or loopback on --metrics-port) reads it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ..blocks import text_of
from ..processes import no_traceback
from .test_serve import CLIENT_TOKENS, TOKEN, _client, _start
from .test_serve_gateway import UPSTREAM

pytestmark = pytest.mark.anyio

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    """Every sample of a scrape by (name, sorted labels), parsed by prometheus_client."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _once_listed(url: str) -> None:
    """Wait until serve has listed the live upstream (it lists upstreams in the background,
    after it starts answering)."""
    deadline = time.monotonic() + 60
    while _scrape(url).get(("toolkeeper_upstream_up", (("upstream", "up"),))) != 1:
        assert time.monotonic() < deadline, "the upstream 'up' was never listed"
        time.sleep(0.2)


def _scrape(url: str, token: str | None = TOKEN) -> Samples:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return _samples(response.text)


def _metrics_line(proc: subprocess.Popen[str]) -> str:
    """The start line naming /metrics (the start lines come out together, after the first)."""
    assert proc.stdout is not None
    for _ in range(8):
        line = proc.stdout.readline()
        if line.startswith("metrics: "):
            return line
    pytest.fail("serve printed no metrics line")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A server with the example tools and two upstreams (one that runs, one that cannot
    start), /metrics on loopback too: (its URL, the loopback metrics URL)."""
    config = tmp_path / "toolkeeper.toml"
    config.write_text(
        "[mcp]\nenabled = true\n"
        "[[mcp.servers]]\nname = \"up\"\n"
        "sandbox = false\n"  # a test server of ours, with the test's own folder
        f"command = {json.dumps(sys.executable)}\nargs = {json.dumps([UPSTREAM, str(tmp_path)])}\n"
        "connect_timeout_s = 30\n"
        "[[mcp.servers]]\nname = \"gone\"\n"
        f"sandbox = false\ncommand = {json.dumps(str(tmp_path / 'no-such-server'))}\nconnect_timeout_s = 5\n")
    proc, url = _start(tmp_path, "--config", str(config), "--metrics-port", "0")
    line = _metrics_line(proc)
    assert f"{url}/metrics (operator token)" in line
    side = line.split(" and ")[1].split()[0].removesuffix("/metrics")
    _once_listed(url)
    yield url, side
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) in (0, 130)
    no_traceback(proc)


async def test_calls_approvals_and_upstreams_are_counted_as_they_happen(
        served: tuple[str, str]) -> None:
    url, _side = served
    before = _scrape(url)
    assert before[("toolkeeper_approvals_pending", ())] == 0
    assert before[("toolkeeper_upstream_up", (("upstream", "up"),))] == 1
    assert before[("toolkeeper_upstream_up", (("upstream", "gone"),))] == 0
    alert = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}
    async with _client(url) as client:
        for city in ("Lisbon", "Porto"):
            assert not (await client.call_tool("get_forecast", {"city": city})).is_error
        assert (await client.call_tool("get_forecast", {"days": 2})).is_error
        assert (await client.call_tool("no_such_tool", {})).is_error
        assert (await client.call_tool(f"made_up_{'x' * 40}", {})).is_error
        assert not (await client.call_tool("up-add", {"a": 1, "b": 2})).is_error
        pending = await client.call_tool("broadcast_alert", alert)
    assert "waiting for approval" in text_of(pending.content[0])
    after = _scrape(url)
    calls = {labels: v for (name, labels), v in after.items()
             if name == "toolkeeper_tool_calls_total"}
    assert calls == {
        (("status", "ok"), ("tool", "get_forecast")): 2,
        (("status", "error"), ("tool", "get_forecast")): 1,
        (("status", "error"), ("tool", "_unknown")): 2,  # invented names share one series
        (("status", "ok"), ("tool", "up-add")): 1,
        (("status", "pending"), ("tool", "broadcast_alert")): 1,
    }
    by_client = {labels: v for (name, labels), v in after.items()
                 if name == "toolkeeper_client_calls_total"}
    assert by_client == {(("client", "default"), ("status", "ok")): 3,
                         (("client", "default"), ("status", "error")): 3,
                         (("client", "default"), ("status", "pending")): 1}
    assert after[("toolkeeper_tool_call_duration_seconds_count",
                  (("tool", "get_forecast"),))] == 3
    assert after[("toolkeeper_tool_call_duration_seconds_bucket",
                  (("le", "+Inf"), ("tool", "get_forecast")))] == 3
    assert after[("toolkeeper_tool_call_duration_seconds_sum", (("tool", "get_forecast"),))] > 0
    assert after[("toolkeeper_approvals_pending", ())] == 1

    listed = httpx.get(f"{url}/api/approvals", timeout=30,
                       headers={"Authorization": f"Bearer {TOKEN}"}).json()
    (request_id,) = [a["id"] for a in listed["approvals"] if a["tool"] == "broadcast_alert"]
    decided = httpx.post(f"{url}/api/approvals/{request_id}/decision", timeout=30,
                         headers={"Authorization": f"Bearer {TOKEN}"},
                         json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    final = _scrape(url)
    assert final[("toolkeeper_approvals_pending", ())] == 0
    assert final[("toolkeeper_approvals_decided_total", (("outcome", "approved"),))] == 1
    assert final[("toolkeeper_approval_wait_seconds_count", (("outcome", "approved"),))] == 1
    assert final[("toolkeeper_approvals_expired_total", ())] == 0
    again = _scrape(url)  # a change is counted once, however often it is scraped
    assert again[("toolkeeper_approvals_decided_total", (("outcome", "approved"),))] == 1


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401), ({"Authorization": "Bearer wrong"}, 401), ({"Authorization": "Bearer CLIENT"}, 403),
])
def test_only_the_operator_reads_metrics_on_the_main_port(
        served: tuple[str, str], headers: dict[str, str], status: int) -> None:
    url, _side = served
    headers = {k: v.replace("CLIENT", CLIENT_TOKENS[url]) for k, v in headers.items()}
    response = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert response.status_code == status
    assert "toolkeeper_tool_calls" not in response.text
    assert "operator token" in response.json()["message"]


def test_the_metrics_port_answers_loopback_without_a_credential_and_no_foreign_host(
        served: tuple[str, str]) -> None:
    url, side = served
    assert side.startswith("http://127.0.0.1:") and side != url
    samples = _scrape(side, token=None)
    assert samples[("toolkeeper_upstream_up", (("upstream", "up"),))] == 1
    foreign = httpx.get(f"{side}/metrics", headers={"Host": "evil.example"}, timeout=30)
    assert foreign.status_code == 403 and "toolkeeper_" not in foreign.text
    assert httpx.get(f"{side}/mcp", timeout=30).status_code == 404  # metrics only


@pytest.mark.parametrize("args", [["--metrics-port", "70000"], ["--metrics-port", "0", "--stdio"]])
def test_a_bad_metrics_port_is_one_clear_error(tmp_path: Path, args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "toolkeeper.cli", "serve", "--no-builtins",
                           "--state-dir", str(tmp_path / "state"), *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--metrics-port must be a port from 0 to 65535" in lines[0]


async def test_on_postgresql_an_expired_request_is_counted_and_leaves_pending(
        tmp_path: Path, postgres_url: str) -> None:
    proc, url = _start(tmp_path, "--store", postgres_url, "--approval-ttl", "1")
    try:
        alert = {"alert": {"region": "PT-11", "level": "red", "message": "Storm"}}
        async with _client(url) as client:
            assert (await client.call_tool("broadcast_alert", alert)).is_error
        assert _scrape(url)[("toolkeeper_approvals_pending", ())] == 1
        await anyio.sleep(1.5)  # past the request's time to live
        samples = _scrape(url)
        assert samples[("toolkeeper_approvals_pending", ())] == 0
        assert samples[("toolkeeper_approvals_expired_total", ())] == 1
        assert ("toolkeeper_approvals_decided_total", (("outcome", "approved"),)) not in samples
        assert samples[("toolkeeper_tool_calls_total",
                        (("status", "pending"), ("tool", "broadcast_alert")))] == 1
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)
        no_traceback(proc)


def test_past_the_label_cap_further_tools_share_one_series(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkeeper import HookManager, ToolInvoker, tool
    from toolkeeper.hooks import HookEvent
    from toolkeeper.server import metrics as metrics_module

    tools = []
    for n in range(3):
        @tool(name=f"t{n}")
        def one() -> str:
            """A tool."""
            return "x"
        tools.append(one)
    monkeypatch.setattr(metrics_module, "MAX_TOOL_LABELS", 2)
    invoker = ToolInvoker(tools, hooks=HookManager())
    served = metrics_module.ServerMetrics(invoker)
    for name in ("t0", "t1", "t2", "t2", "nope"):
        served._ended(HookEvent.TOOL_END, {"tool": name, "status": "ok", "duration_ms": 1.0})
    calls = {labels: v for (name, labels), v in _samples(served.render().decode()).items()
             if name == "toolkeeper_tool_calls_total"}
    assert calls == {(("status", "ok"), ("tool", "t0")): 1, (("status", "ok"), ("tool", "t1")): 1,
                     (("status", "ok"), ("tool", "_other")): 2,
                     (("status", "ok"), ("tool", "_unknown")): 1}


def test_past_the_client_cap_further_clients_share_one_series(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkeeper import HookManager, ToolInvoker
    from toolkeeper.hooks import HookEvent
    from toolkeeper.server import metrics as metrics_module

    monkeypatch.setattr(metrics_module, "MAX_CLIENT_LABELS", 3)
    served = metrics_module.ServerMetrics(ToolInvoker([], hooks=HookManager()))
    for client in ("alice", "oauth:app:u1", "oauth:app:u2", "", "bob", "carol", "alice"):
        served._ended(HookEvent.TOOL_END, {"tool": "t", "client": client, "status": "ok"})
    calls = {dict(labels)["client"]: v for (name, labels), v in
             _samples(served.render().decode()).items() if name == "toolkeeper_client_calls_total"}
    assert calls == {"alice": 2, "oauth:app": 2, "_none": 1, "_other": 2}
