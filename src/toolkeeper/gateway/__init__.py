"""The gateway: other MCP servers (upstreams) served through toolkeeper — their tools as
governed, namespaced tools of a Toolbox, their resources and prompts namespaced the same way,
every declaration pinned (``pins.py``), and what an upstream says or asks during a relayed call
(logs, progress, sampling, elicitation) relayed to the client that made it (``relay.py``).
Needs the ``mcp`` extra."""

from .gateway import MCPGateway, attach_upstreams, remote_risk
from .pins import Pin, SqlitePins, fingerprint
from .upstream import Upstream, UpstreamError

__all__ = ["MCPGateway", "Pin", "SqlitePins", "Upstream", "UpstreamError", "attach_upstreams",
           "fingerprint", "remote_risk"]
