"""An OAuth access token's scopes are the principal's in a policy, through a real ``toolkeeper
serve`` trusting a real issuer: a client's scopes decide which calls run (``principal.scopes``
of ``Client``), and an operator's decide which requests they may decide (of ``Operator``)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ..blocks import text_of
from .test_oauth import ALERT, Issuer, _claims, _client, _serve, _stop, issuer

pytestmark = pytest.mark.anyio
__all__ = ["issuer"]  # the issuer fixture, shared with the OAuth tests

SCOPED = '''
@id("alerts-need-the-alerts-scope")
@reason("broadcasting an alert needs the weather:alerts scope")
forbid (principal, action == Action::"broadcast_alert", resource)
unless { principal.scopes.contains("weather:alerts") };

@id("alerts-decided-by-dispatch")
@reason("alerts are approved by dispatch")
forbid (principal, action == Action::"decide", resource)
when { resource.name == "broadcast_alert" }
unless { principal.scopes.contains("weather:dispatch") };
'''


async def test_a_tokens_scopes_decide_what_its_holder_calls_and_decides(
        tmp_path: Path, issuer: Issuer) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team.cedar").write_text(SCOPED)
    served = _serve(tmp_path, issuer)
    try:
        plain = issuer.sign(**_claims(served, issuer, sub="alice"))
        alerting = issuer.sign(**_claims(served, issuer, scope="weather:all weather:alerts",
                                         sub="bob"))
        async with _client(served.url, plain) as client:
            refused = await client.call_tool("broadcast_alert", ALERT)
        async with _client(served.url, alerting) as client:
            asked = await client.call_tool("broadcast_alert", ALERT)
        said = text_of(asked.content[0])
        request_id = said.split("request ")[1].split(")")[0].split(";")[0]
        decision = f"{served.url}/api/approvals/{request_id}/decision"
        answers = [httpx.post(decision, json={"decision": "approve"}, timeout=10, headers={
            "Authorization": "Bearer " + issuer.sign(**_claims(
                served, issuer, scope=scope, sub=person, client_id="console"))})
            for scope, person in (("weather:operator", "olga"),
                                  ("weather:operator weather:dispatch", "dora"))]
    finally:
        _stop(served)
    assert refused.is_error and "policy alerts-need-the-alerts-scope (broadcasting an alert " \
        "needs the weather:alerts scope)" in text_of(refused.content[0])
    assert asked.is_error and "waiting for approval" in said
    assert answers[0].status_code == 403, answers[0].text
    assert "operator 'olga' may not decide" in answers[0].json()["message"]
    assert "policy alerts-decided-by-dispatch" in answers[0].json()["message"]
    assert answers[1].status_code == 200, answers[1].text
    assert answers[1].json()["decision"]["approver"] == "operator:dora"
