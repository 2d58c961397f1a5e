"""The MCP front, ``snapshot-kernel mcp``: argument parsing without the SDK (``cli``), the
tools (``server``, which imports the optional ``mcp`` SDK), their backends and their text."""
