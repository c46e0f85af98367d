"""The gateway's upstream client as the conformance suite's client under test:
``python conformance_client.py handshake|discover URL`` (the suite appends the URL of its
scenario server). It connects the way the gateway connects to an upstream — ``Upstream`` with
its bounds, ``discover = true`` or not — lists the tools and calls each one (``add_numbers``
with two numbers), then closes."""

from __future__ import annotations

import sys

import anyio

from toolkeeper.config import MCPServerConfig
from toolkeeper.gateway.upstream import Upstream


async def main(mode: str, url: str) -> None:
    config = MCPServerConfig(name="conformance", url=url, connect_timeout_s=20,
                             call_timeout_s=20, discover=mode == "discover")
    async with anyio.create_task_group() as group:
        upstream = Upstream(config, group)
        for tool in await upstream.list_tools():
            arguments = {"a": 2, "b": 3} if tool.name == "add_numbers" else {}
            await upstream.call(tool.name, arguments)
        await upstream.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[-1])
