"""``idee-agent mcp list`` (configured servers and their tools) and ``idee-agent mcp serve``."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import IdeeAgentError


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command group to the ``idee-agent`` app."""
    mcp_app = typer.Typer(
        help="MCP: servidores externos configurados y nuestro propio servidor MCP.",
        no_args_is_help=True,
    )

    @mcp_app.command("list")
    def list_servers(
        config: Annotated[
            Path | None,
            typer.Option("--config", "-c", help="mcp_servers.json (por defecto MCP_SERVERS_PATH)."),
        ] = None,
        json_output: Annotated[bool, typer.Option("--json", help="Salida JSON.")] = False,
    ) -> None:
        """Connect to each configured MCP server and list its tools."""
        from ..cli import fail
        from ..config import get_settings
        from ..toolbox.registry import ToolRegistry
        from .client import MCPManager
        from .config import load_mcp_config

        settings = get_settings()
        path = config or settings.mcp_servers_path
        if not path:
            fail("No hay servidores MCP configurados: define MCP_SERVERS_PATH o usa --config.")
        try:
            configs = load_mcp_config(path)
            registry = ToolRegistry.load(settings)
        except IdeeAgentError as exc:
            fail(str(exc))

        async def discover() -> list[dict[str, Any]]:
            manager = MCPManager(configs)
            await manager.attach(registry)
            try:
                return manager.status()
            finally:
                await manager.aclose()

        status = asyncio.run(discover())
        for entry in status:
            for tool in entry["tools"]:
                spec = registry.specs.get(tool["name"])
                if not tool["registered"] and spec is not None:
                    tool["collides_with"] = spec.origin
        if json_output:
            typer.echo(json.dumps(status, ensure_ascii=False, indent=2))
        else:
            _print_status(status)
        if any(e["status"] != "connected" for e in status):
            raise typer.Exit(1)

    @mcp_app.command("serve")
    def serve(
        transport: Annotated[
            str, typer.Option("--transport", "-t", help="stdio o http (streamable HTTP).")
        ] = "stdio",
        host: Annotated[str, typer.Option(help="Dirección HTTP.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Puerto HTTP (0 = uno libre).")] = 8765,
        path: Annotated[str, typer.Option(help="Ruta del endpoint HTTP.")] = "/mcp",
        tool: Annotated[
            list[str] | None,
            typer.Option("--tool", help="Ofrecer solo estas herramientas (repetible)."),
        ] = None,
    ) -> None:
        """Offer our server-side tools (geocoder, IDEE search, catalog, detection...) over MCP."""
        from ..cli import fail
        from .server import IdeeMCPServer

        transport = transport.strip().lower()
        if transport not in ("stdio", "http"):
            fail(f"Transporte '{transport}' no válido: usa stdio o http.")
        try:
            server = IdeeMCPServer(tools=tool or None)
        except IdeeAgentError as exc:
            fail(str(exc))
        if transport == "stdio":
            asyncio.run(server.serve_stdio())
            return
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            fail(f"No se pudo abrir {host}:{port}: {exc}. Prueba otro --port.")
        sock.listen(128)
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        print(
            f"Servidor MCP en http://{shown}:{bound}{path} — herramientas: "
            f"{', '.join(server.tool_names)} (Ctrl+C para parar)",
            file=sys.stderr,
            flush=True,
        )
        if host not in ("127.0.0.1", "localhost", "::1"):
            print(
                "Aviso: el servidor no tiene autenticación; ábrelo solo en redes de confianza.",
                file=sys.stderr,
            )
        try:
            asyncio.run(server.serve_http(host=host, port=bound, path=path, sock=sock))
        except KeyboardInterrupt:
            pass

    app.add_typer(mcp_app, name="mcp")


def _print_status(status: list[dict[str, Any]]) -> None:
    for entry in status:
        ok = entry["status"] == "connected"
        mark = typer.style("●" if ok else "✗", fg=typer.colors.GREEN if ok else typer.colors.RED)
        state = (
            f"conectado, {len(entry['tools'])} herramientas"
            if ok
            else f"sin conexión: {entry['error']}"
        )
        typer.echo(f"{mark} {entry['name']} [{entry['transport']}] {entry['target']} — {state}")
        for tool in entry["tools"]:
            note = ""
            if not tool["registered"]:
                note = typer.style(
                    f"  (omitida: choca con {tool.get('collides_with', 'otra herramienta')})",
                    fg=typer.colors.YELLOW,
                )
            first = (tool["description"].splitlines() or [""])[0][:80]
            typer.echo(f"    {tool['name']:<24} {first}{note}")
