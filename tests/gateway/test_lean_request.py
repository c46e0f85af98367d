"""The lean path writes a call's JSON-RPC request itself (one ``json.dumps`` of the envelope):
what the SDK's request model writes, for any arguments a client can send — byte for byte but
for the spelling of a float (``1e-06`` against ``1e-6``: the same number)."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper.gateway.lean import _request

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(name=st.text(), arguments=st.dictionaries(st.text(), JSON, max_size=5))
def test_the_request_is_written_byte_for_byte_as_the_sdk_s_model_writes_it(
        name: str, arguments: dict[str, Any]) -> None:
    model = types.JSONRPCRequest(jsonrpc="2.0", id="toolkeeper-7", method="tools/call",
                                 params={"name": name, "arguments": arguments})
    ours, theirs = _request("toolkeeper-7", name, arguments), model.model_dump_json(
        by_alias=True, exclude_unset=True).encode()
    assert json.loads(ours) == json.loads(theirs)
    if not _floats(arguments):
        assert ours == theirs


def _floats(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_floats(v) for v in value.values())
    return isinstance(value, list) and any(_floats(v) for v in value)


def test_what_plain_json_cannot_say_is_written_by_the_model_as_before() -> None:
    for odd in (float("nan"), float("inf")):
        model = types.JSONRPCRequest(jsonrpc="2.0", id="i", method="tools/call",
                                     params={"name": "t", "arguments": {"x": odd}})
        assert _request("i", "t", {"x": odd}) == model.model_dump_json(
            by_alias=True, exclude_unset=True).encode()


def test_a_call_skips_the_client_s_layers_only_when_none_of_them_would_act() -> None:
    import httpx2

    from toolkeeper.gateway.lean import LeanLink

    transport = httpx2.AsyncHTTPTransport()

    def link(**options: Any) -> LeanLink:
        return LeanLink("http://127.0.0.1:1/mcp", httpx2.AsyncClient(transport=transport,
                                                                      **options), None, transport)

    async def hook(_: Any) -> None:
        return None

    assert link()._direct()
    assert not LeanLink("http://127.0.0.1:1/mcp", httpx2.AsyncClient(), None)._direct()
    for options in ({"auth": ("user", "secret")}, {"cookies": {"route": "b7"}},
                    {"event_hooks": {"request": [hook]}}, {"event_hooks": {"response": [hook]}},
                    {"follow_redirects": True}, {"params": {"key": "1"}}):
        assert not link(**options)._direct(), options
