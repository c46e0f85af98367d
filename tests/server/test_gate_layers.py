"""The gate is its layers, in order, each one job, composed as data: a request meets them one
after another and the first that answers it ends it."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest

from toolkeeper.core.context import CALLER_KEY
from toolkeeper.server.gate import TokenGate

pytestmark = pytest.mark.anyio
TOKEN = "operator-token-0123456789"


async def test_the_gate_is_its_layers_and_the_first_that_answers_ends_the_request() -> None:
    seen: list[object] = []

    async def app(scope: MutableMapping[str, Any], _receive: Any, send: Any) -> None:
        seen.append(scope.get("state", {}).get(CALLER_KEY))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    gate = TokenGate(app, TOKEN, protected=("/mcp", "/api"))
    assert [type(layer).__name__ for layer in gate.layers] == [
        "Metadata", "Credentials", "Roles", "SameOrigin", "Required", "RateLimit", "ToolScope",
        "Identified"]
    transport = httpx.ASGITransport(app=gate)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        operator = {"Authorization": f"Bearer {TOKEN}"}
        refused = await http.post("/mcp", headers=operator)  # Roles: not on /mcp
        missing = await http.get("/api/requests")  # Required: no credential
        foreign = await http.get("/", headers={"Host": "evil.example"})  # SameOrigin
        api = await http.get("/api/requests", headers=operator)
    assert (refused.status_code, refused.json()["error"]) == (403, "operator_on_mcp")
    assert (missing.status_code, foreign.status_code, api.status_code) == (401, 403, 200)
    assert api.headers["x-frame-options"] == "DENY"  # SameOrigin's headers on the answer
    assert len(seen) == 1 and getattr(seen[0], "channel", None) == "api"  # Identified
