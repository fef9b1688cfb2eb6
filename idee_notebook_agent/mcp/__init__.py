"""MCP: external tool servers join the agent loop, and our own tools are offered as an MCP server.

* ``client.attach_mcp_servers`` — connects the servers of ``mcp_servers.json``
  (``MCP_SERVERS_PATH``) and registers their tools (``Agent.start`` calls it);
* ``server.IdeeMCPServer`` — geocodePlace, searchIdeeService, fetchWebPage, listDetectors,
  detectObjects and the layer catalog lookup over stdio or streamable HTTP
  (``idee-agent mcp serve``).

The official ``mcp`` SDK is imported only when a connection or a server starts.
"""
