"""``toolkeeper serve``: the governed tool server — the MCP endpoint over Streamable HTTP with
bearer tokens and DNS-rebinding protection, the approval page and its JSON API, and the state
they keep. ``WebApprovalHandler`` brings the same page to an agent loop of your own."""

from .web import WebApprovalHandler

__all__ = ["WebApprovalHandler"]
