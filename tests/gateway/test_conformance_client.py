"""The official conformance suite's client scenarios (``make conformance`` installs it) driving
the gateway's own upstream client (``conformance_client.py``): the scenario server of each
revision is reached in that revision when the upstream's entry says ``discover = true``, and in
2025-11-25 by default (an upstream that speaks both keeps the relay's open connection)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..mcp.conformance.test_conformance import PRELOAD, PRERELEASE, _suite

DRIVER = str(Path(__file__).resolve().parent / "conformance_client.py")


def _scenario(mode: str, scenario: str, revision: str, out: Path, *extra: str) -> list[str]:
    """The failed checks (id: message) of one client scenario at one revision."""
    if shutil.which("node") is None or not _suite(PRERELEASE).is_file():
        pytest.skip("the conformance suite is not installed: run `make conformance` (needs "
                    "node and npm)")
    scratch = out.parent / "tmp"  # the driver's temporary files, checked empty after the run
    scratch.mkdir()
    done = subprocess.run(
        ["node", "--import", str(PRELOAD), str(_suite(PRERELEASE)), "client", "--command",
         f"{sys.executable} {DRIVER} {mode}", "--scenario", scenario, "--spec-version",
         revision, "--output-dir", str(out), *extra], capture_output=True, text=True, timeout=300,
        cwd=out.parent, env={**os.environ, "TMPDIR": str(scratch)})
    found = sorted(out.glob("**/checks.json"))  # an auth/ scenario is one folder deeper
    assert found, f"the suite ran nothing: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    # a login's state (its tokens, the key sealing them) goes with the run
    assert sorted(p.name for p in scratch.iterdir() if p.name.startswith("tk-")) == []
    return [f"{c['id']}: {c.get('errorMessage', '')}"[:300] for path in found
            for c in json.loads(path.read_text()) if c.get("status") == "FAILURE"]


@pytest.mark.parametrize(("scenario", "revision"), [
    ("tools_call", "2025-11-25"), ("tools_call", "2026-07-28"),
    ("request-metadata", "2026-07-28"), ("initialize", "2025-11-25")])
def test_with_discover_the_gateway_client_passes_each_revision_s_client_scenarios(
        scenario: str, revision: str, tmp_path: Path) -> None:
    assert _scenario("discover", scenario, revision, tmp_path / "out") == []


@pytest.mark.parametrize("scenario", ["tools_call", "initialize", "sse-retry"])
def test_by_default_the_gateway_client_passes_the_2025_11_25_client_scenarios(
        scenario: str, tmp_path: Path) -> None:
    assert _scenario("handshake", scenario, "2025-11-25", tmp_path / "out") == []


AUTH_2025 = ["metadata-default", "metadata-var1", "metadata-var2", "metadata-var3", "basic-cimd",
             "scope-from-www-authenticate", "scope-from-scopes-supported",
             "scope-omitted-when-undefined", "scope-step-up", "scope-retry-limit",
             "token-endpoint-auth-basic", "token-endpoint-auth-post",
             "token-endpoint-auth-none", "pre-registration"]
AUTH_2026 = ["resource-mismatch", "offline-access-scope", "offline-access-not-supported",
             "authorization-server-migration", "iss-supported", "iss-not-advertised",
             "iss-supported-missing", "iss-wrong-issuer", "iss-unexpected", "iss-normalized",
             "metadata-issuer-mismatch", "metadata-default", "scope-step-up"]


@pytest.mark.parametrize("scenario", AUTH_2025)
def test_the_gateway_client_passes_the_2025_11_25_auth_scenarios_with_a_login(
        scenario: str, tmp_path: Path) -> None:
    assert _scenario("handshake", f"auth/{scenario}", "2025-11-25", tmp_path / "out") == []


@pytest.mark.parametrize("scenario", AUTH_2026)
def test_the_gateway_client_passes_the_2026_07_28_auth_scenarios_with_a_login(
        scenario: str, tmp_path: Path) -> None:
    assert _scenario("discover", f"auth/{scenario}", "2026-07-28", tmp_path / "out") == []


@pytest.mark.parametrize("scenario", ["oauth-metadata-backcompat", "oauth-endpoint-fallback"])
def test_the_gateway_client_passes_the_2025_03_26_auth_scenarios(
        scenario: str, tmp_path: Path) -> None:
    assert _scenario("handshake", f"auth/2025-03-26-{scenario}", "2025-03-26",
                     tmp_path / "out") == []


def test_the_gateway_client_passes_the_client_credentials_extension_scenario(
        tmp_path: Path) -> None:
    assert _scenario("discover", "auth/client-credentials-basic", "2026-07-28",
                     tmp_path / "out", "--force") == []


def test_the_gateway_client_passes_the_private_key_jwt_extension_scenario(
        tmp_path: Path) -> None:
    assert _scenario("discover", "auth/client-credentials-jwt", "2026-07-28",
                     tmp_path / "out", "--force") == []
