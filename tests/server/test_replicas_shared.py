"""Two ``toolkeeper serve`` replicas (one worker each) on one real PostgreSQL database, no
session affinity: a client's rate limit is one bucket however its requests are spread, and a
2026-07-28 ``input_required`` round answered by one replica is completed by the retried call on
the other (``requestState`` sealed under a key the replicas share through the store, never
under one derived from the operator token)."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.request_state import InvalidRequestState

from toolkeeper.mcp.asking import state_security

from ..blocks import text_of
from ..processes import no_traceback
from .test_serve import CLIENT_TOKENS, TOKEN, _start

pytestmark = pytest.mark.anyio

TOOLS = '''
from toolkeeper import ToolContext, tool


@tool
async def greet(ctx: ToolContext) -> str:
    """Ask the person at the client for a name and greet them."""
    answer = await ctx.elicit("Your name?", {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    return f"hello {answer['content']['name']}"
'''

Replicas = list[tuple[subprocess.Popen[str], str]]


def _two(tmp_path: Path, postgres_url: str, *args: str) -> Replicas:
    (tmp_path / "tools.py").write_text(TOOLS)
    started = [_start(tmp_path, "--store", postgres_url, *args, tools=str(tmp_path / "tools.py"),
                      state=f"r{i}") for i in range(2)]
    for _, url in started:  # the first made the store's default client: one agent, 2 replicas
        CLIENT_TOKENS[url] = CLIENT_TOKENS[started[0][1]]
    return started


@pytest.fixture
def replicas(tmp_path: Path, postgres_url: str, request: pytest.FixtureRequest
             ) -> Iterator[Replicas]:
    started = _two(tmp_path, postgres_url, *request.param)
    yield started
    for proc, _ in started:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        no_traceback(proc)


@pytest.mark.parametrize("replicas", [("--rate-limit", "0.01")], indirect=True)
def test_a_clients_requests_spread_over_two_replicas_share_one_rate_limit(
        replicas: Replicas) -> None:
    # 0.01 a second with room for 1: one request is admitted, the next refills in 100 s.
    (_, a), (_, b) = replicas
    headers = {"Authorization": f"Bearer {CLIENT_TOKENS[a]}",
               "Accept": "application/json, text/event-stream"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    statuses = [httpx.post(f"{url}/mcp", json=ping, headers=headers, timeout=30).status_code
                for url in (a, b, a, b)]
    assert statuses[0] != 429 and statuses[1:] == [429, 429, 429], statuses


class _Balancer(httpx2.AsyncBaseTransport):
    """A load balancer in front of two replicas: a call that carries a ``requestState`` (the
    retry of an ``input_required`` round) goes to the second, every other request to the
    first; what each was sent is kept."""

    def __init__(self, first: str, second: str) -> None:
        self.first, self.second = first, second
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(await request.aread() or b"{}")
        params = body.get("params") if isinstance(body, dict) else None
        target = self.second if isinstance(params, dict) and "requestState" in params \
            else self.first
        self.sent.append((target, body if isinstance(body, dict) else {}))
        request.url = request.url.copy_with(port=httpx2.URL(target).port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _greet_across(a: str, b: str) -> tuple[Any, _Balancer, list[str]]:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    balancer = _Balancer(a, b)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {CLIENT_TOKENS[a]}"},
                              timeout=60, transport=balancer)
    async with Client(streamable_http_client(f"{a}/mcp", http_client=http), mode="auto",
                      elicitation_callback=elicit) as client:
        result = await client.call_tool("greet", {})
    return result, balancer, asked


def _retries(balancer: _Balancer) -> list[tuple[str, str]]:
    """(replica, requestState) of each retried call."""
    return [(target, body["params"]["requestState"]) for target, body in balancer.sent
            if body.get("method") == "tools/call" and "requestState" in body.get("params", {})]


@pytest.mark.parametrize("replicas", [()], indirect=True)
async def test_an_input_required_round_from_one_replica_is_completed_on_another(
        replicas: Replicas) -> None:
    (_, a), (_, b) = replicas
    result, balancer, asked = await _greet_across(a, b)
    assert asked == ["Your name?"]
    assert [target for target, _ in _retries(balancer)] == [b], balancer.sent
    assert not result.is_error, result
    assert text_of(result.content[0]) == "hello Ada"


@pytest.mark.parametrize("replicas", [()], indirect=True)
async def test_request_state_is_not_sealed_under_a_key_derived_from_the_operator_token(
        replicas: Replicas) -> None:
    # A client holds every requestState it is sent: were it sealed under a key derived from
    # the operator token, each would let it test guesses of that token offline.
    (_, a), (_, b) = replicas
    _, balancer, _ = await _greet_across(a, b)
    ((_, sealed),) = _retries(balancer)
    codec: Callable[[str], bytes] = state_security(TOKEN, None).codec.unseal
    with pytest.raises(InvalidRequestState):
        codec(sealed)
