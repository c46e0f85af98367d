"""Guardrails: deny patterns and size limits trip, secrets are redacted, rate limits hold."""

from __future__ import annotations

import pytest

from toolkeeper import tool
from toolkeeper.guardrails import ArgumentDenyPatterns, ArgumentSizeLimit, RateLimit, SecretRedactor
from toolkeeper.invoke import ToolInvoker
from toolkeeper.toolbox import Toolbox

from ..invoke.helpers import call, recording_hooks

pytestmark = pytest.mark.anyio


@tool
def run_sql(query: str) -> str:
    """Run a read-only query."""
    return f"ran {query}"


@tool
def leak() -> str:
    """Returns configuration."""
    return "token=sk-proj-abcdefghijklmnopqrstuvwxyz012345 region=eu AKIAABCDEFGHIJKLMNOP"


def invoker(*guardrails: object, **kwargs: object) -> ToolInvoker:
    return ToolInvoker(Toolbox([run_sql, leak]), guardrails=guardrails, **kwargs)  # type: ignore[arg-type]


async def test_deny_patterns_trip_naming_the_guardrail_and_the_argument() -> None:
    hooks, events = recording_hooks()
    inv = invoker(ArgumentDenyPatterns({"run_*": [r"(?i)\bdrop\s+table\b"]}), hooks=hooks)
    async with inv.open_session() as session:
        denied = await inv.invoke(call("run_sql", query="DROP TABLE users"), session=session)
        fine = await inv.invoke(call("run_sql", query="select 1"), session=session)
    assert (denied.status, denied.error_code) == ("denied", "guardrail_tripped")
    assert "guardrail 'deny_patterns'" in denied.text and "argument 'query'" in denied.text
    assert fine.ok
    assert "guardrail_tripped" in [e for e, _ in events]


async def test_argument_size_limit() -> None:
    inv = invoker(ArgumentSizeLimit(max_bytes=50))
    async with inv.open_session() as session:
        result = await inv.invoke(call("run_sql", query="x" * 100), session=session)
    assert result.status == "denied" and "more than the limit of 50" in result.text


async def test_secrets_in_output_are_redacted() -> None:
    inv = invoker(SecretRedactor())
    async with inv.open_session() as session:
        result = await inv.invoke(call("leak"), session=session)
    assert "sk-proj" not in result.text and "AKIA" not in result.text
    assert result.text == "token=[REDACTED] region=eu [REDACTED]"


async def test_rate_limit_per_tool() -> None:
    inv = invoker(RateLimit(calls=2, per_s=60, tools="run_sql"))
    async with inv.open_session() as session:
        statuses = [(await inv.invoke(call("run_sql", query="q"), session=session)).status
                    for _ in range(3)]
        other = await inv.invoke(call("leak"), session=session)
    assert statuses == ["ok", "ok", "denied"]
    assert other.ok


class _WrongRedaction:
    """Redacts with values of the wrong kind: a list for arguments, a string for a result."""

    name = "wrong"

    async def check_input(self, tool: object, arguments: dict[str, object]) -> object:
        from toolkeeper.guardrails.base import redact
        return redact(["not", "a", "dict"]) if "query" in arguments else redact(arguments)

    async def check_output(self, tool: object, result: object) -> object:
        from toolkeeper.guardrails.base import redact
        return redact("plain text")


async def test_a_redaction_of_the_wrong_kind_is_named_and_nothing_runs() -> None:
    inv = invoker(_WrongRedaction())
    async with inv.open_session() as session:
        arguments = await inv.invoke(call("run_sql", query="select 1"), session=session)
        result = await inv.invoke(call("leak"), session=session)
    assert not arguments.ran and arguments.error_code == "invoker_error"
    assert "guardrail 'wrong' redacted the arguments of 'run_sql' with a list" in arguments.text
    assert result.error_code == "invoker_error"
    assert "guardrail 'wrong' redacted the result of 'leak' with a str" in result.text
