"""Sans-IO wire protocols: line framing, JSON-RPC, the FLOW Run/1 and MCP dialects."""

__all__: list[str] = []
