"""MCP tool calls through the agent's registry versus the bare SDK session on the same server.

Baseline: ``mcp.Client.call_tool("echo")`` on an open session (what any MCP client pays).
Measured: ``ToolRegistry.execute`` of the registered MCP tool (owner-task race, wire dump,
result conversion, validation). Also the seed's plain JSON-RPC against a bare ``httpx`` POST, and
the time to connect and list tools per transport. Target: our overhead ≤ 1 ms per call.

Run: ``.venv/bin/python benchmarks/bench_mcp.py``
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.conversation import ToolCall
from idee_notebook_agent.mcp.client import MCPManager
from idee_notebook_agent.mcp.config import parse_mcp_config
from idee_notebook_agent.toolbox.registry import ToolContext, ToolRegistry
from tests.fakes.mcp_server import HttpServerProcess, SeedJsonRpcServer, stdio_params

CALLS = 300


async def per_call(fn) -> float:
    for _ in range(10):  # warm-up
        await fn()
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def sdk_baseline(target) -> float:
    from mcp import Client

    async with Client(target, cache=None) as client:
        return await per_call(lambda: client.call_tool("echo", {"text": "hola"}))


async def seed_baseline(url: str) -> float:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": "seedEcho", "arguments": {"text": "hola"}}
    async with httpx.AsyncClient() as http:
        return await per_call(lambda: http.post(url, json=body))


async def ours(entry: dict, tool: str) -> tuple[float, float]:
    registry = ToolRegistry.load(Settings(), include_builtin_executors=False)
    manager = MCPManager(parse_mcp_config([entry]))
    start = time.perf_counter()
    await manager.attach(registry)
    connect = time.perf_counter() - start
    ctx = ToolContext(Settings())
    call = ToolCall(tool, {"text": "hola"})
    try:
        return connect, await per_call(lambda: registry.execute(call, ctx))
    finally:
        await manager.aclose()


def row(label: str, base: float, mine: float, connect: float) -> None:
    print(
        f"{label:<16} SDK/bare {base * 1000:7.3f} ms · nuestro {mine * 1000:7.3f} ms · "
        f"x{mine / base:5.2f} · +{(mine - base) * 1000:6.3f} ms/llamada · "
        f"conectar+listar {connect * 1000:7.1f} ms"
    )


async def main() -> None:
    from mcp import StdioServerParameters

    http = HttpServerProcess("bench-http").start()
    try:
        base = await sdk_baseline(http.url)
        connect, mine = await ours({"name": "h", "url": http.url}, "echo")
        row("streamable HTTP", base, mine, connect)
    finally:
        http.stop()

    entry = stdio_params("bench-stdio")
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], cwd=entry["cwd"], env=entry["env"]
    )
    base = await sdk_baseline(params)
    connect, mine = await ours(entry, "echo")
    row("stdio", base, mine, connect)

    with SeedJsonRpcServer() as seed:
        base = await seed_baseline(seed.url)
        connect, mine = await ours(
            {"name": "s", "url": seed.url, "transport": "jsonrpc"}, "seedEcho"
        )
        row("JSON-RPC (seed)", base, mine, connect)


if __name__ == "__main__":
    asyncio.run(main())
