"""Our server-side tools offered as an MCP server, so other MCP clients (desktop assistants, IDEs)
can use Spanish geodata through us: geocodePlace, searchIdeeService, fetchWebPage,
listDetectors, detectObjects and a layer-catalog lookup.

Specs and executors come from the same ``ToolRegistry`` the agent uses (no second copy of any
tool): the JSON Schema of ``tools/*.json`` is the MCP ``inputSchema``, arguments are validated
with it, and results go back as JSON text plus structured content. Layers a tool draws
(``ctx.emit_layer``: a municipality boundary, detected pools) travel as embedded resources.
Tools of *other* MCP servers attached to the registry are never re-exported.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ..config import Settings, get_settings
from ..core.conversation import ToolCall
from ..errors import ConfigurationError, ToolError
from ..toolbox.registry import ToolContext, ToolRegistry
from ..toolbox.specs import ToolSpec

log = logging.getLogger(__name__)

SERVER_NAME = "idee-notebook-agent"
DEFAULT_TOOLS: tuple[str, ...] = (
    "geocodePlace",
    "searchIdeeService",
    "fetchWebPage",
    "listDetectors",
    "detectObjects",
)
CATALOG_TOOL = "lookupCatalogLayer"
CATALOG_SPEC = ToolSpec(
    name=CATALOG_TOOL,
    description=(
        "Busca una capa en el catálogo de capas IGN/IDEE por id o título (p. ej. 'IGNBaseGris', "
        "'PNOA', 'Catastro') y devuelve su definición completa (type, url, name, format, "
        "matrixSet, attribution...) lista para añadirla a un visor. Si el nombre es ambiguo "
        "devuelve las candidatas. (Layer catalog lookup: returns a full WMS/WMTS definition.)"
    ),
    parameters={
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "Id o título de la capa en el catálogo, p. ej. 'IGNBaseGris'.",
            }
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    origin="mcp-server",
)
INSTRUCTIONS = (
    "Herramientas de datos espaciales de España (IGN, IDEE, CartoCiudad, PNOA, Catastro): "
    "geocodificación, búsqueda de servicios OGC de la IDEE, catálogo de capas, lectura de "
    "páginas web y detección de objetos sobre ortofoto PNOA. Coordenadas en grados EPSG:4326. "
    "(Spanish national geodata tools; coordinates in EPSG:4326 degrees.)"
)


class IdeeMCPServer:
    """The tools we offer and how a call runs; ``lowlevel()`` wraps them in the SDK server."""

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        settings: Settings | None = None,
        *,
        tools: list[str] | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.registry = registry or ToolRegistry.load(self.settings)
        wanted = list(tools) if tools is not None else self._default_tools()
        unknown = [n for n in wanted if n != CATALOG_TOOL and not self.registry.is_server_tool(n)]
        if unknown:
            raise ConfigurationError(
                "Estas herramientas no son herramientas de servidor y no se pueden ofrecer por "
                f"MCP: {', '.join(unknown)}. Disponibles: {', '.join(self._default_tools())}."
            )
        self.tool_names = wanted

    def _default_tools(self) -> list[str]:
        """The built-in server tools, then any other native server tool (never MCP ones)."""
        names = [n for n in DEFAULT_TOOLS if self.registry.is_server_tool(n)]
        for spec in self.registry.tool_list():
            if (
                self.registry.is_server_tool(spec.name)
                and spec.name not in names
                and not spec.origin.startswith("mcp:")
            ):
                names.append(spec.name)
        return [*names, CATALOG_TOOL]

    def specs(self) -> list[ToolSpec]:
        return [
            CATALOG_SPEC if name == CATALOG_TOOL else self.registry.specs[name]
            for name in self.tool_names
        ]

    def input_schema(self, name: str) -> dict[str, Any] | None:
        if name == CATALOG_TOOL:
            return CATALOG_SPEC.parameters
        spec = self.registry.specs.get(name) if name in self.tool_names else None
        return spec.parameters if spec is not None else None

    async def run_tool(self, name: str, arguments: dict[str, Any]) -> tuple[Any, bool, list[dict]]:
        """Run one exposed tool: ``(result, success, layers drawn)``; tool errors are results."""
        if name not in self.tool_names:
            known = ", ".join(self.tool_names)
            error = f"Herramienta desconocida '{name}'. Disponibles: {known}."
            return {"success": False, "error": error}, False, []
        if name == CATALOG_TOOL:
            return (*self._lookup_catalog(arguments), [])
        from ..core.events import LayerEvent

        call = ToolCall(name, dict(arguments))
        problem = self.registry.check_call(call)
        if problem is not None:
            return {"success": False, "error": problem}, False, []
        emitted: list[Any] = []
        ctx = ToolContext(self.settings, None, emitted.append, None)
        result, success = await self.registry.execute(call, ctx)
        layers = [e.layer for e in emitted if isinstance(e, LayerEvent)]
        return result, success, layers

    def _lookup_catalog(self, arguments: dict[str, Any]) -> tuple[Any, bool]:
        name = str(arguments.get("name") or "").strip()
        if not name:
            return {"success": False, "error": "Indica 'name': el id o título de la capa."}, False
        if "addLayer" not in self.registry.preprocessors:
            return {
                "success": False,
                "error": "El catálogo de capas no está disponible en esta instalación.",
            }, False
        ctx = ToolContext(self.settings)
        try:
            call = self.registry.preprocess(ToolCall("addLayer", {"name": name}), ctx)
        except ToolError as exc:
            return {"success": False, "error": str(exc), **exc.data}, False
        except Exception as exc:  # a catalog bug must not take the server down
            log.exception("Fallo en la búsqueda del catálogo")
            return {"success": False, "error": f"Error del catálogo: {exc}"}, False
        return {"success": True, "query": name, "layer": call.args}, True

    # ------------------------------------------------------------------ the SDK server
    def lowlevel(self) -> Any:
        """An ``mcp.server.Server`` answering ``tools/list`` and ``tools/call`` with our tools."""
        from mcp.server import Server
        from mcp.types import CallToolResult, ListToolsResult, Tool

        from .. import __version__

        async def list_tools(ctx: Any, params: Any) -> Any:
            return ListToolsResult(
                tools=[
                    Tool(name=s.name, description=s.description, input_schema=s.parameters)
                    for s in self.specs()
                ]
            )

        async def call_tool(ctx: Any, params: Any) -> Any:
            result, success, layers = await self.run_tool(params.name, params.arguments or {})
            return CallToolResult(**_call_result(result, success, layers))

        return Server(
            SERVER_NAME,
            version=__version__,
            instructions=INSTRUCTIONS,
            get_tool_input_schema=self.input_schema,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )

    def http_app(self, *, host: str = "127.0.0.1", path: str = "/mcp") -> Any:
        """The streamable HTTP ASGI app (Starlette) serving this server at ``path``."""
        return self.lowlevel().streamable_http_app(streamable_http_path=path, host=host)

    async def serve_stdio(self) -> None:
        """Serve on stdin/stdout until the client closes them (logs go to stderr)."""
        from mcp.server.stdio import stdio_server

        server = self.lowlevel()
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    async def serve_http(
        self, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp", sock: Any = None
    ) -> None:
        """Serve streamable HTTP with uvicorn until stopped."""
        import uvicorn

        config = uvicorn.Config(
            self.http_app(host=host, path=path), host=host, port=port, log_level="warning"
        )
        await uvicorn.Server(config).serve(sockets=[sock] if sock is not None else None)


def _call_result(result: Any, success: bool, layers: list[dict]) -> dict[str, Any]:
    """``CallToolResult`` fields: JSON text, structured content, drawn layers as resources."""
    from mcp.types import EmbeddedResource, TextContent, TextResourceContents

    content: list[Any] = [
        TextContent(type="text", text=json.dumps(result, ensure_ascii=False, default=str))
    ]
    for index, layer in enumerate(layers):
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", str(layer.get("name") or "capa")).strip("-")
        is_geojson = str(layer.get("type", "")).lower() == "geojson"
        content.append(
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri=f"idee://layers/{index}/{slug or 'capa'}",
                    mime_type="application/geo+json" if is_geojson else "application/json",
                    text=json.dumps(
                        layer.get("source") if is_geojson and layer.get("source") else layer,
                        ensure_ascii=False,
                        default=str,
                    ),
                ),
            )
        )
    fields: dict[str, Any] = {"content": content, "is_error": not success}
    if success:
        structured = result if isinstance(result, dict) else {"result": result}
        fields["structured_content"] = json.loads(json.dumps(structured, default=str))
    return fields
