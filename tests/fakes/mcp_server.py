"""Fake MCP servers for the MCP client tests: real ones built with the ``mcp`` SDK, plus a seed one.

* ``build_server()`` — an ``MCPServer`` with a few tools: ``echo``, ``add`` (structured JSON),
  ``picture`` (image content), ``fail`` (tool error), ``slow`` (sleeps), ``crash`` (the process
  dies mid-call) and ``zoomTo`` (collides with our native map tool).
* Run as a program it serves that server over stdio (``--transport stdio``), streamable HTTP
  (``--transport http --port 0``) or SSE (``--transport sse``) on 127.0.0.1, printing
  ``PORT <n>`` once it listens, so tests can kill it like a real external process.
* ``serve_asgi`` serves any ASGI app (our own MCP server, a small REST app) with uvicorn in a
  thread.
* ``SeedJsonRpcServer`` — a plain JSON-RPC-over-HTTP server like the seed's ``test_mcp_server.py``
  (CONTRACT.md section 11): it answers only ``tools/list`` and ``tools/call``, with no
  ``initialize`` handshake, and errors as JSON-RPC ``-32000`` with HTTP 200.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# A 1x1 transparent PNG: the smallest real image a tool can return.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


def build_server(name: str = "fake-mcp"):
    """The SDK server every transport of this fake exposes."""
    import anyio
    from mcp.server.mcpserver import Image, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(name, instructions="Servidor MCP de pruebas.")

    @server.tool(description="Devuelve el texto recibido.")
    def echo(text: str) -> str:
        return f"eco: {text}"

    @server.tool(description="Suma dos números y devuelve JSON estructurado.")
    def add(a: float, b: float) -> dict[str, float]:
        return {"sum": a + b}

    @server.tool(description="Devuelve una imagen PNG y un texto.", structured_output=False)
    def picture() -> list[Any]:
        return ["una imagen de 1x1", Image(data=PIXEL_PNG, format="png")]

    @server.tool(description="Siempre falla.")
    def fail(reason: str = "sin motivo") -> str:
        raise ToolError(f"fallo pedido: {reason}")

    @server.tool(description="Espera unos segundos antes de responder.")
    async def slow(seconds: float = 5.0) -> str:
        await anyio.sleep(seconds)
        return f"terminé tras {seconds} s"

    @server.tool(description="Mata el proceso del servidor en mitad de la llamada.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="Herramienta con el mismo nombre que una nativa del mapa.")
    def zoomTo(lat: float, lon: float) -> str:  # the name must collide
        return "no debería llamarse"

    return server


# ---------------------------------------------------------------------------------------------
# Subprocess helpers: real processes the tests can kill.


def stdio_params(name: str = "fake-stdio") -> dict[str, Any]:
    """The ``mcp_servers.json`` entry that launches this module over stdio."""
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server", "--transport", "stdio", "--name", name],
        "cwd": str(REPO),
        "env": {"PYTHONPATH": str(REPO)},
    }


class HttpServerProcess:
    """This module serving HTTP in a child process: streamable HTTP at ``/mcp`` (or the older
    SSE transport at ``/sse`` with ``transport="sse"``)."""

    def __init__(self, name: str = "fake-http", port: int = 0, transport: str = "http") -> None:
        self.name = name
        self.port = port
        self.transport = transport
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        path = "/sse" if self.transport == "sse" else "/mcp"
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self, timeout: float = 30.0) -> HttpServerProcess:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        cmd = [sys.executable, "-m", "tests.fakes.mcp_server", "--transport", self.transport]
        cmd += ["--port", str(self.port), "--name", self.name]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("PORT "):
                self.port = int(line.split()[1])
                return self
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError("el servidor MCP de pruebas no arrancó")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@contextlib.contextmanager
def serve_asgi(app: Any, loop: str = "auto") -> Iterator[str]:
    """Serve an ASGI app with uvicorn (uvloop when available) on 127.0.0.1 in a thread."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", loop=loop))
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])), name="uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert server.started, "uvicorn no arrancó"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# The seed's plain JSON-RPC server.


class SeedJsonRpcServer:
    """Answers ``tools/list``/``tools/call`` only, like the seed's sample server (CONTRACT 11)."""

    TOOLS = [
        {
            "name": "seedEcho",
            "description": "Eco del servidor del seed.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
        {"name": "seedFail", "description": "Falla siempre."},
    ]

    def __init__(self) -> None:
        self.methods: list[str] = []
        seed = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seed.methods.append(body.get("method"))
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": body.get("id")}
                method = body.get("method")
                params = body.get("params") or {}
                if method == "tools/list":
                    reply["result"] = {"tools": seed.TOOLS}
                elif method == "tools/call" and params.get("name") == "seedEcho":
                    text = params.get("arguments", {}).get("text", "")
                    reply["result"] = {"content": [{"type": "text", "text": f"seed: {text}"}]}
                elif method == "tools/call":
                    reply["error"] = {"code": -32000, "message": "la herramienta falló"}
                else:
                    reply["error"] = {"code": -32000, "message": f"Unknown method: {method}"}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> SeedJsonRpcServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="fake-mcp")
    args = parser.parse_args(argv)
    server = build_server(args.name)
    if args.transport == "stdio":
        server.run("stdio")
        return

    import anyio
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    if args.transport == "sse":
        app = server.sse_app(host="127.0.0.1")
    else:
        app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
