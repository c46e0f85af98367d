"""``toolkeeper serve``: the governed tool server — the MCP endpoint over Streamable HTTP with
bearer tokens and DNS-rebinding protection, and the state it keeps."""
